"""The serving path stays small: ``serve`` must not load libraries only other commands need.

scikit-learn with SciPy alone added ~90 MB to ``serve``'s resident size (issue 15: budget
≤ 250 MB) because a search-snippet helper imported the merge's topic clustering at module
level; LanceDB's REST namespace client (~14 MB: its API classes, ``ApiClient`` and urllib3)
because ``import lancedb`` runs that package's ``__init__``. This runs, in a fresh
interpreter, what a daemon runs — the CLI, the composition root, the API, the scheduler and
the watcher modules — then adds an Episode over the API, indexes it and searches it (snippet
included), and checks which heavy packages ended up in ``sys.modules``. The other tests
prove each check can fail: the offline insights still load scikit-learn on demand (a
merge's topic clustering, which used to, loads neither it nor SciPy since session 13: ~90 MB
more in every process that merged, kept for good by a daemon),
and the deferred REST client still works when asked for — its names, its HTTP calls and
LanceDB's namespace connections.
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
#: imported (scikit-learn + SciPy ~90 MB; rich + pygments, via httpx, ~3 MB; urllib3 comes only
#: with LanceDB's REST namespace client).
NOT_ON_SERVE_PATH = ("sklearn", "scipy", "pandas", "matplotlib", "onnx", "openai",
                     "schemathesis", "ray", "mcp", "polars", "torch", "rich", "pygments",
                     "urllib3")
#: the REST namespace client's package: imported (its models are), its __init__ not run
REST_CLIENT = "lance_namespace_urllib3_client"

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
        assert topic_labels([[1.0, 0.2, 0.9], [0.2, 1.0, 0.1], [0.9, 0.1, 1.0]]) == [0, 1, 0]
    elif sys.argv[2] == "insights":
        from everos_reflect.strategies.insights_offline import recurring_topics
        recurring_topics([])
    runtime.close()
    from everos_reflect.index.deferred import is_deferred
    print(json.dumps({"hits": len(hits), "snippet": hits[0]["snippet"] if hits else None,
                      "modules": sorted({m.split(".")[0] for m in sys.modules}),
                      "rest_client_deferred": is_deferred("lance_namespace_urllib3_client"),
                      "rest_client_modules": sorted(
                          m for m in sys.modules
                          if m.startswith("lance_namespace_urllib3_client.")
                          and not m.startswith("lance_namespace_urllib3_client.models"))}))
""")


def run_fresh(script: str, *args: str, root: Path | None = None) -> dict:
    """Run ``script`` in a fresh interpreter; the JSON it prints last."""
    env = {**os.environ, **({"EVEROS_ROOT": str(root)} if root else {})}
    done = subprocess.run([sys.executable, "-c", script, *args], env=env,
                          capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def loaded_after_search(root: Path, then: str = "") -> dict:
    """Run SCRIPT in a fresh interpreter; its report (hits, snippet, top-level modules)."""
    return run_fresh(SCRIPT, str(root), then, root=root)


def test_serve_and_search_do_not_import_heavy_libraries(root: Path) -> None:
    report = loaded_after_search(root)
    assert report["hits"] == 1
    assert "Toby" in report["snippet"]
    heavy = sorted(set(NOT_ON_SERVE_PATH) & set(report["modules"]))
    assert heavy == [], f"the serve/search path imported {heavy}"
    # the libraries search does need are really there (the check looks at the right list)
    assert {"lancedb", "fastapi", "numpy"} <= set(report["modules"])
    # LanceDB ran, with the REST client's models, without the client's own __init__
    assert REST_CLIENT in report["modules"]
    assert report["rest_client_deferred"] is True
    assert report["rest_client_modules"] == []


def test_a_merges_topic_clustering_loads_neither_scikit_learn_nor_scipy(root: Path) -> None:
    report = loaded_after_search(root, then="merge")
    heavy = sorted(set(NOT_ON_SERVE_PATH) & set(report["modules"]))
    assert heavy == [], f"a merge's topic clustering imported {heavy}"


def test_the_offline_insights_still_load_scikit_learn_on_demand(root: Path) -> None:
    report = loaded_after_search(root, then="insights")
    assert {"sklearn", "scipy"} <= set(report["modules"])


#: The REST client, in a process where LanceDB is loaded the way serve loads it: every public
#: name of the package, a real HTTP call through ``NamespaceApi`` to a local fake server, and
#: LanceDB's own (directory) namespace connection.
REST_CLIENT_SCRIPT = textwrap.dedent("""
    import json, sys, tempfile, threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    import everos_reflect.index.vectors  # noqa: F401 - imports lancedb as serve does
    import lancedb
    import pyarrow as pa
    from everos_reflect.index.deferred import is_deferred

    report = {"deferred_at_start": is_deferred("lance_namespace_urllib3_client"),
              "urllib3_at_start": "urllib3" in sys.modules}
    with tempfile.TemporaryDirectory() as folder:
        db = lancedb.connect_namespace("dir", {"root": folder})
        db.create_table("notes", pa.table({"n": [1, 2, 3]}))
        report["namespace_tables"] = list(db.list_tables().tables)
        report["namespace_rows"] = db.open_table("notes").count_rows()
    report["deferred_after_namespace"] = is_deferred("lance_namespace_urllib3_client")

    seen = []

    class Fake(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            body = json.dumps({"namespaces": ["team_a", "team_b"]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Fake)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    import lance_namespace_urllib3_client as client
    from lance_namespace_urllib3_client import ApiClient, Configuration, NamespaceApi
    config = Configuration(host=f"http://127.0.0.1:{server.server_port}")
    with ApiClient(config) as api_client:
        listed = NamespaceApi(api_client).list_namespaces("root")
    server.shutdown()
    report.update(
        listed=list(listed.namespaces), paths=seen,
        deferred_after_use=is_deferred("lance_namespace_urllib3_client"),
        same_class=ApiClient is sys.modules["lance_namespace_urllib3_client.api_client"].ApiClient,
        names=sorted(n for n in dir(client) if not n.startswith("_")))
    print(json.dumps(report))
""")

EAGER_NAMES_SCRIPT = textwrap.dedent("""
    import json
    import lance_namespace_urllib3_client as client  # without everos_reflect: an eager import
    print(json.dumps({"names": sorted(n for n in dir(client) if not n.startswith("_"))}))
""")


def test_the_deferred_rest_client_loads_and_works_when_asked_for() -> None:
    report = run_fresh(REST_CLIENT_SCRIPT)
    assert report["deferred_at_start"] is True
    assert report["urllib3_at_start"] is False
    # LanceDB's namespace connections work on the models alone
    assert report["namespace_tables"] == ["notes"]
    assert report["namespace_rows"] == 3
    assert report["deferred_after_namespace"] is True
    # first use of the client runs its __init__: a real call through it answers
    assert report["listed"] == ["team_a", "team_b"]
    assert report["paths"] and report["paths"][0].startswith("/v1/namespace/root/list")
    assert report["deferred_after_use"] is False
    assert report["same_class"] is True
    # ... and the package then has every public name an eager import gives it
    eager = run_fresh(EAGER_NAMES_SCRIPT)["names"]
    assert len(eager) > 100
    assert report["names"] == eager


#: Commands that read or write Markdown and SQLite only, run in one fresh interpreter.
CLI_SCRIPT = textwrap.dedent("""
    import json, sys
    from everos_reflect.cli.main import cli

    codes = []
    add = ["add", "--user", "u_andrew", "--subject", "Dog", "--content", "Adopted Toby."]
    for args in (["--version"], add, ["status"], ["lint"], ["runs"]):
        try:
            cli.main(args, standalone_mode=False)
            codes.append(0)
        except SystemExit as exc:
            codes.append(exc.code)
    print(json.dumps({"codes": codes, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
""")


def test_commands_that_need_no_vectors_do_not_import_lancedb(root: Path) -> None:
    # `import lancedb` (with pyarrow's dataset and compute) is ~0.5 s of every command's start
    # when the CLI imports it eagerly: `--version` took 1.1 s
    report = run_fresh(CLI_SCRIPT, root=root)
    assert report["codes"] == [0, 0, 0, 0, 0]
    assert {"lancedb", "pyarrow"} & set(report["modules"]) == set()
    assert "everos_reflect" in report["modules"]
