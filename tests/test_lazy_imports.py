"""The serving path stays small: ``serve`` must not load libraries only other commands need.

scikit-learn with SciPy alone added ~90 MB to ``serve``'s resident size (issue 15: budget
≤ 250 MB) because a search-snippet helper imported the merge's topic clustering at module
level. This runs, in a fresh interpreter, what a daemon runs — the CLI, the composition root,
the API, the scheduler and the watcher modules — then adds an Episode over the API, indexes it
and searches it (snippet included), and checks which heavy packages ended up in
``sys.modules``. The second test proves the check can fail: the merge's topic clustering still
loads scikit-learn, on demand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

#: Packages the serve/search path must not import: each is only needed by a merge, a bench,
#: a test tool, another provider or a client command, and each costs MBs resident once
#: imported (scikit-learn + SciPy ~90 MB; rich + pygments, via httpx, ~3 MB).
NOT_ON_SERVE_PATH = ("sklearn", "scipy", "pandas", "matplotlib", "onnx", "openai",
                     "schemathesis", "ray", "mcp", "polars", "torch", "rich", "pygments")

SCRIPT = textwrap.dedent("""
    import asyncio, json, sys
    from pathlib import Path

    import everos_reflect.cli.main  # noqa: F401 - what `everos-reflect serve` loads
    import everos_reflect.engine.scheduler  # noqa: F401
    import everos_reflect.index.watcher  # noqa: F401
    import everos_reflect.serve  # noqa: F401
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.index.sync import Indexer
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings
    from everos_reflect.api.app import create_app
    from everos_reflect.engine.engine import Engine

    runtime = Runtime(Path(sys.argv[1]), Settings(), embedder=HashEmbedder())
    app = create_app(runtime, Engine(runtime))

    def call(path, body):
        # a bare ASGI request, as uvicorn makes it (an HTTP client library would itself
        # import what this test looks for)
        sent = []

        async def receive():
            return {"type": "http.request", "body": json.dumps(body).encode(),
                    "more_body": False}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
                 "root_path": "", "query_string": b"", "server": ("127.0.0.1", 8000),
                 "client": ("127.0.0.1", 5000),
                 "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]}
        asyncio.run(app(scope, receive, send))
        status = sent[0]["status"]
        return status, json.loads(b"".join(m.get("body", b"") for m in sent[1:]))

    status, reply = call("/api/v1/memory/episodes", {
        "user_id": "u_andrew", "subject": "Adopted a dog",
        "content": "Andrew adopted a dog named Toby. He walks Toby every morning.",
        "timestamp": "2026-09-10T10:00:00+00:00"})
    assert status == 201, reply
    Indexer(runtime).scan()
    status, reply = call("/api/v1/memory/search",
                         {"query": "dog named Toby", "user_id": "u_andrew"})
    assert status == 200, reply
    hits = reply["data"]["episodes"]
    if sys.argv[2] == "merge":
        from everos_reflect.llm.topics import topic_labels
        topic_labels([[1.0, 0.2], [0.2, 1.0]])
    runtime.close()
    print(json.dumps({"hits": len(hits), "snippet": hits[0]["snippet"] if hits else None,
                      "modules": sorted({m.split(".")[0] for m in sys.modules})}))
""")


def loaded_after_search(root: Path, then: str = "") -> dict:
    """Run SCRIPT in a fresh interpreter; its report (hits, snippet, top-level modules)."""
    env = {**os.environ, "EVEROS_ROOT": str(root)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(root), then], env=env,
                          capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_serve_and_search_do_not_import_heavy_libraries(root: Path) -> None:
    report = loaded_after_search(root)
    assert report["hits"] == 1
    assert "Toby" in report["snippet"]
    heavy = sorted(set(NOT_ON_SERVE_PATH) & set(report["modules"]))
    assert heavy == [], f"the serve/search path imported {heavy}"
    # the libraries search does need are really there (the check looks at the right list)
    assert {"lancedb", "fastapi", "numpy"} <= set(report["modules"])


def test_a_merge_still_loads_scikit_learn_on_demand(root: Path) -> None:
    report = loaded_after_search(root, then="merge")
    assert {"sklearn", "scipy"} <= set(report["modules"])
