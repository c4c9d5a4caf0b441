"""Loopback servers and process helpers for the chaos harness.

The harness runs the real ``everos-reflect`` command in child processes and kills them. The
bundled ONNX embedder would make every child spend seconds loading and embedding, so children
embed through the project's fake OpenAI server (tests/fake_openai.py) with a bag-of-words
embedding that still clusters texts sharing words. The same server plays the faulty LLM.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.fake_openai import FakeOpenAI  # noqa: E402

DIM = 64
EXE = [sys.executable, "-m", "everos_reflect.cli.main"]
WORD = re.compile(r"[a-z0-9]+")


def words_vector(text: str, dim: int = DIM) -> list[float]:
    """Hash each word into one of ``dim`` buckets: texts sharing words are similar."""
    vec = [0.0] * dim
    for word in WORD.findall(text.lower()):
        if len(word) > 2:
            vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0:
        vec[0], norm = 1.0, 1.0
    return [v / norm for v in vec]


class ChaosOpenAI(FakeOpenAI):
    """The fake server with bag-of-words embeddings (instead of hash noise) for every request."""

    def _next(self, queue: Any) -> Any:
        if queue is self._embed:
            return self._embed_reply
        return super()._next(queue)

    @staticmethod
    def _embed_reply(body: dict[str, Any]) -> Any:
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else texts
        dim = int(body.get("dimensions") or DIM)
        return _EmbeddingReply([words_vector(str(t), dim) for t in texts])


class _EmbeddingReply:
    """Marker the patched handler understands (see :func:`_install`)."""

    def __init__(self, vectors: list[list[float]]) -> None:
        self.vectors = vectors


def _install() -> None:
    """Teach the fake's handler to answer an :class:`_EmbeddingReply`."""
    import base64
    import struct

    from tests import fake_openai

    handler = fake_openai._Handler
    original = handler._answer
    if getattr(original, "_chaos", False):
        return

    def answer(self: Any, item: Any, body: dict[str, Any], *, chat: bool) -> None:
        if callable(item) and not chat:
            item = item(body)
        if isinstance(item, _EmbeddingReply):
            packed = body.get("encoding_format") == "base64"
            data = [{"object": "embedding", "index": i,
                     "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode()
                     if packed else v} for i, v in enumerate(item.vectors)]
            self._json(200, {"object": "list", "model": body.get("model", "fake"),
                             "data": data, "usage": {"prompt_tokens": 1, "total_tokens": 1}})
            return
        original(self, item, body, chat=chat)

    answer._chaos = True  # type: ignore[attr-defined]
    handler._answer = answer


_install()


def child_env(base_url: str, **extra: str) -> dict[str, str]:
    """Environment of every child: embeddings from the fake server, LLM extractive unless
    ``extra`` says otherwise, no proxy surprises."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVEROS_")}
    env.update({
        "EVEROS_EMBEDDING__PROVIDER": "openai",
        "EVEROS_EMBEDDING__BASE_URL": base_url,
        "EVEROS_EMBEDDING__API_KEY": "chaos",
        "EVEROS_EMBEDDING__MODEL": "chaos-words",
        "EVEROS_EMBEDDING__DIMENSIONS": str(DIM),
        "EVEROS_LLM__PROVIDER": "extractive",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "PYTHONPATH": str(REPO),
    })
    env.update(extra)
    return env


def run(args: list[str], env: dict[str, str], *,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``everos-reflect ARGS`` to completion."""
    return subprocess.run([*EXE, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def run_killed(args: list[str], env: dict[str, str], after: float) -> tuple[bool, int | None]:
    """Start ``everos-reflect ARGS`` and SIGKILL it ``after`` seconds in. Returns (killed,
    exit code if it finished first)."""
    proc = subprocess.Popen([*EXE, *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=REPO)
    try:
        code = proc.wait(after)
        return False, code
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True, None


def peak_rss_mb(pid: int) -> float | None:
    """VmHWM (peak resident set) of a live process, in MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def wait_until(predicate: Any, timeout: float, step: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False
