"""A memory root this process cannot write (a read-only mount, another user's files) is still
read: searched and briefed from its index as last built, with a note saying so; what would
write to it is refused in one line.

The root is made read-only the way it is in real use: a read-only bind mount, in a mount
namespace of the test's own (``unshare -m``), so even root gets EROFS. Every command runs as
a real process, as a user runs it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "everos_reflect.cli.main"]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(tmp_path), "EVEROS_EMBEDDING__PROVIDER": "local",
            "EVEROS_LLM__PROVIDER": "extractive", "NO_COLOR": "1", "COLUMNS": "200"}


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=_env(tmp_path), capture_output=True, text=True,
                          timeout=120)


def _mount_namespaces() -> bool:
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _mount_namespaces(),
                                reason="needs a private mount namespace (unshare -m)")


def _read_only(tmp_path: Path, root: Path,
               commands: list[list[str]] | list[list[str] | tuple[list[str], Path]]
               ) -> list[dict[str, str]]:
    """Run each command (CLI arguments; or a whole command line and the file its stdin
    reads) on ``root`` mounted read-only; stdout, stderr and exit status of each."""
    out = tmp_path / "out"
    out.mkdir()
    lines = [f"mount --bind {shlex.quote(str(root))} {shlex.quote(str(root))} || exit 9",
             f"mount -o remount,bind,ro {shlex.quote(str(root))} || exit 9"]
    for n, command in enumerate(commands):
        argv, stdin = command if isinstance(command, tuple) else ([*CLI, *command], None)
        cmd = " ".join(shlex.quote(a) for a in argv)
        if stdin is not None:
            cmd += f" <{shlex.quote(str(stdin))}"
        lines.append(f"{cmd} >{out}/{n}.out 2>{out}/{n}.err; echo $? >{out}/{n}.rc")
    subprocess.run(["unshare", "-m", "sh", "-c", "\n".join(lines)], env=_env(tmp_path),
                   check=True, timeout=600)
    return [{"out": (out / f"{n}.out").read_text(), "err": (out / f"{n}.err").read_text(),
             "rc": (out / f"{n}.rc").read_text().strip()} for n in range(len(commands))]


@pytest.fixture(scope="module")
def indexed_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A root with one Episode (u1, 2026-10-12) added and indexed by the CLI, made once for
    the module (three tests start from it): the root and the id. The CLI ran with HOME the
    root's parent, as a test's does, so that folder also holds the model cache it wrote."""
    home = tmp_path_factory.mktemp("indexed")
    root = home / "root"
    assert _cli(home, "init", str(root)).returncode == 0
    added = _cli(home, "add", "--root", str(root), "--user", "u1", "--subject", "pets",
                 "--content", "Andrew adopted a dog named Toby.", "--timestamp",
                 "2026-10-12T09:00:00+00:00")
    assert added.returncode == 0, added.stderr
    assert _cli(home, "reindex", "--root", str(root)).returncode == 0
    return root, added.stdout.strip()


def _indexed_root(tmp_path: Path, template: tuple[Path, str]) -> tuple[Path, str]:
    """A copy of ``indexed_template``'s folder (the root at ``tmp_path/root``, and the HOME
    cache its commands wrote) into ``tmp_path``; returns the root and the Episode's id."""
    shutil.copytree(template[0].parent, tmp_path, symlinks=True, dirs_exist_ok=True)
    return tmp_path / "root", template[1]


def test_read_only_root_is_searched_as_indexed_and_writes_are_refused(
        tmp_path: Path, indexed_template: tuple[Path, str]) -> None:
    root, dog = _indexed_root(tmp_path, indexed_template)
    # a hand edit after the last sync: a read-only reader cannot index it, and says so
    log = next(root.rglob("episode-2026-10-12.md"))
    log.write_text(log.read_text() + "\nA note written by hand.\n")
    before = sorted((p.relative_to(root), p.stat().st_size) for p in root.rglob("*"))

    search, insight, briefing, status, status_text, add, serve = _read_only(tmp_path, root, [
        ["search", "--root", str(root), "--json", "dog"],
        ["search", "--root", str(root), "--json", "--kind", "insight", "dog"],
        ["briefing", "--root", str(root), "--user", "u1", "--json", "dog"],
        ["status", "--root", str(root), "--json"],
        ["status", "--root", str(root)],
        ["add", "--root", str(root), "--user", "u1", "--subject", "s", "--content", "c"],
        ["serve", "--root", str(root), "--port", "8799"],
    ])

    assert search["rc"] == "0", search["err"]
    assert [h["id"] for h in json.loads(search["out"])["episodes"]] == [dog]
    assert json.loads(search["out"])["index"] == {"read_only": True, "files_behind": 1}
    assert search["err"].strip() == (f"note: {root} is read-only here: its index is read as "
                                     "last built; 1 log changed since then is not seen")
    # a kind never indexed here has no table, and reads as empty, not as an error
    assert insight["rc"] == "0", insight["err"]
    assert json.loads(insight["out"])["episodes"] == []
    assert briefing["rc"] == "0", briefing["err"]
    assert dog in briefing["out"]
    assert status["rc"] == "0", status["err"]
    doc = json.loads(status["out"])
    assert doc["counts_from"] == "index"  # the index opened read-only (it said "not built")
    assert doc["totals"]["episode"]["live"] == 1
    assert doc["index"]["files_changed"] == 1 and doc["index"]["read_only"] is True
    assert "(read-only here: read as last built)" in status_text["out"]
    for refused in (add, serve):
        assert refused["rc"] == "1"
        assert refused["err"].startswith("error: ") and "Traceback" not in refused["err"]
    assert "read-only here" in serve["err"]
    assert sorted((p.relative_to(root), p.stat().st_size) for p in root.rglob("*")) == before


def test_read_only_root_lists_its_clusters_and_refuses_recluster_in_one_line(
        tmp_path: Path) -> None:
    # `recluster` on a read-only root died with a traceback
    # (sqlite3.OperationalError: attempt to write a readonly database)
    root = tmp_path / "root"
    assert _cli(tmp_path, "init", str(root)).returncode == 0
    for day in (12, 13):
        assert _cli(tmp_path, "add", "--root", str(root), "--user", "u1", "--subject", "pets",
                    "--content", f"Andrew adopted a dog named Toby, note {day}.", "--timestamp",
                    f"2026-10-{day}T09:00:00+00:00").returncode == 0
    assert _cli(tmp_path, "reindex", "--root", str(root)).returncode == 0
    before = sorted((p.relative_to(root), p.stat().st_size) for p in root.rglob("*"))

    listed, recluster = _read_only(tmp_path, root, [
        ["clusters", "--root", str(root), "--json"],
        ["recluster", "--root", str(root)],
    ])

    assert listed["rc"] == "0", listed["err"]
    assert recluster["rc"] == "1"
    assert recluster["err"].startswith("error: ") and "Traceback" not in recluster["err"]
    assert "read-only here" in recluster["err"]
    assert sorted((p.relative_to(root), p.stat().st_size) for p in root.rglob("*")) == before


def test_every_writing_command_on_a_read_only_root_says_it_is_read_only(
        tmp_path: Path, indexed_template: tuple[Path, str]) -> None:
    # they failed naming a lock or temp file ("Read-only file system: …/.index/locks/md-….lock",
    # "…/.ome.toml.x1y2.tmp"), as if something were wrong with that file
    root, dog = _indexed_root(tmp_path, indexed_template)
    before = sorted((p.relative_to(root), p.stat().st_size) for p in root.rglob("*"))
    r = ["--root", str(root)]

    *refused, enable, disabled = _read_only(tmp_path, root, [
        ["add", *r, "--user", "u1", "--subject", "s", "--content", "c"],
        ["reindex", *r],
        ["trigger", "reflect_episodes", "--force", *r],
        ["task", "add", *r, "--user", "u1", "--type", "t", "--goal", "g", "--step", "s",
         "--outcome", "success"],
        ["undo", dog, "--user", "u1", *r],
        ["resolve", "rel_20261012_0001", "--note", "n", "--user", "u1", *r],
        ["enable", "reflect_episodes", *r],
        ["trigger", "reflect_episodes", *r],
    ])

    for result in refused:
        assert result["rc"] == "1", result
        assert result["err"] == (f"error: the index {root}/.index is read-only here (a "
                                 "read-only mount or another user's files): it is read as "
                                 "last built; run this where the root can be written\n")
    assert enable["rc"] == "1"
    assert enable["err"] == "error: Read-only file system: ome.toml\n"
    assert (disabled["rc"], disabled["out"]) == ("4", "reflect_episodes: disabled [in-process]\n")
    assert sorted((p.relative_to(root), p.stat().st_size) for p in root.rglob("*")) == before


def test_a_read_only_root_never_indexed_says_so_when_a_read_needs_its_index(
        tmp_path: Path) -> None:
    # it failed with "cannot open the index …: unable to open database file (the folder must
    # exist, be writable and have room)"
    root = tmp_path / "root"
    assert _cli(tmp_path, "init", str(root)).returncode == 0
    assert _cli(tmp_path, "add", "--root", str(root), "--user", "u1", "--subject", "pets",
                "--content", "Andrew adopted a dog.").returncode == 0
    assert not (root / ".index" / "sqlite").exists()
    r = ["--root", str(root)]

    *reads, status = _read_only(tmp_path, root, [
        ["search", *r, "dog"], ["briefing", *r, "--user", "u1", "dog"], ["clusters", *r],
        ["status", *r, "--json"],
    ])

    for result in reads:
        assert (result["rc"], result["err"]) == ("1", (
            f"error: {root} is read-only here and was never indexed: there is no index to "
            "read; run `everos-reflect reindex` where the root can be written\n"))
    assert status["rc"] == "0", status["err"]
    assert json.loads(status["out"])["totals"]["episode"]["live"] == 1  # from the Markdown


#: Asks the HTTP API of a root (in-process, as ``serve`` would answer) each ``[path, body]`` of
#: the JSON list in ``argv[2]``; prints each answer's status and body.
_API_SCRIPT = """
import asyncio, json, sys
import httpx
from everos_reflect.api.app import create_app
from everos_reflect.engine.engine import Engine
from everos_reflect.runtime import Runtime

runtime = Runtime(sys.argv[1])
app = create_app(runtime, Engine(runtime))

async def main():
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        for path, body in json.loads(sys.argv[2]):
            answer = await c.post(f"/api/v1/memory/{path}", json=body)
            print(json.dumps([answer.status_code, answer.json()]))

asyncio.run(main())
"""


def _mcp_and_api(tmp_path: Path, root: Path,
                 calls: list[tuple[str, str, dict[str, str]]]) -> list[tuple[list[str], Path]]:
    """``serve``'s two other faces of ``root``, MCP and the HTTP API, as ``_read_only``
    commands asked the same calls, each ``(MCP tool, API path, arguments)``; MCP's answers
    carry ids 1, 2, … in the calls' order."""
    messages = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *({"jsonrpc": "2.0", "id": n, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}}
          for n, (tool, _, arguments) in enumerate(calls, 1))]
    piped = tmp_path / "mcp.jsonl"
    piped.write_text("".join(json.dumps(m) + "\n" for m in messages))
    script = tmp_path / "api.py"
    script.write_text(_API_SCRIPT)
    api_calls = json.dumps([[path, arguments] for _, path, arguments in calls])
    return [([*CLI, "mcp", "--root", str(root)], piped),
            ([sys.executable, str(script), str(root), api_calls], Path(os.devnull))]


def test_mcp_and_the_api_on_a_read_only_root_say_what_the_cli_says(tmp_path: Path) -> None:
    # MCP's search and briefing on a read-only root never indexed answered a 409 file_error
    # "Read-only file system: .index/lancedb", and add_episode one naming a lock file
    root = tmp_path / "root"
    assert _cli(tmp_path, "init", str(root)).returncode == 0
    assert _cli(tmp_path, "add", "--root", str(root), "--user", "u1", "--subject", "pets",
                "--content", "Andrew adopted a dog.").returncode == 0
    faces = _mcp_and_api(tmp_path, root, [
        ("search", "search", {"query": "dog"}),
        ("briefing", "briefing", {"query": "dog", "user_id": "u1"}),
        ("add_episode", "episodes", {"user_id": "u1", "subject": "s", "content": "c"})])
    before = sorted((p.relative_to(root), p.stat().st_size) for p in root.rglob("*"))

    cli, mcp, api = _read_only(tmp_path, root, [["search", "--root", str(root), "dog"], *faces])

    never = cli["err"].removeprefix("error: ").strip()
    assert never == (f"{root} is read-only here and was never indexed: there is no index to "
                     "read; run `everos-reflect reindex` where the root can be written")
    read_only = (f"the index {root}/.index is read-only here (a read-only mount or another "
                 "user's files): it is read as last built; run this where the root can be "
                 "written")
    assert mcp["rc"] == "0", mcp["err"]
    errors = {a["id"]: a["error"] for a in map(json.loads, mcp["out"].splitlines()) if a["id"]}
    assert errors == {
        1: {"code": -32603, "message": never, "data": {"code": "not_indexed", "status": 503}},
        2: {"code": -32603, "message": never, "data": {"code": "not_indexed", "status": 503}},
        3: {"code": -32603, "message": read_only,
            "data": {"code": "index_read_only", "status": 503}}}
    assert api["rc"] == "0", api["err"]
    answers = [json.loads(line) for line in api["out"].splitlines()]
    assert [[status, body.get("error")] for status, body in answers] == [
        [503, {"code": "not_indexed", "message": never}],
        [503, {"code": "not_indexed", "message": never}],
        [503, {"code": "index_read_only", "message": read_only}]]
    assert sorted((p.relative_to(root), p.stat().st_size) for p in root.rglob("*")) == before


def test_mcp_and_the_api_say_when_a_read_only_index_is_behind_its_logs(
        tmp_path: Path, indexed_template: tuple[Path, str]) -> None:
    # the CLI's search said "1 log changed since then is not seen"; MCP's and the API's
    # answered the same hits with no word of it, and an agent took a stale answer for a fresh one
    root, dog = _indexed_root(tmp_path, indexed_template)
    log = next(root.rglob("episode-2026-10-12.md"))
    log.write_text(log.read_text() + "\nA note written by hand.\n")
    faces = _mcp_and_api(tmp_path, root, [
        ("search", "search", {"query": "dog"}),
        ("briefing", "briefing", {"query": "dog", "user_id": "u1"})])
    before = sorted((p.relative_to(root), p.stat().st_size) for p in root.rglob("*"))

    mcp, api = _read_only(tmp_path, root, faces)

    behind = {"read_only": True, "files_behind": 1}
    note = (f"{root} is read-only here: its index is read as last built; 1 log changed since "
            "then is not seen")
    assert mcp["rc"] == "0", mcp["err"]
    answers = {a["id"]: a["result"]["structuredContent"]
               for a in map(json.loads, mcp["out"].splitlines()) if a["id"]}
    assert api["rc"] == "0", api["err"]
    status = [json.loads(line) for line in api["out"].splitlines()]
    assert [s for s, _ in status] == [200, 200]
    for data in (answers[1], answers[2], status[0][1]["data"], status[1][1]["data"]):
        assert (data["index"], data["note"]) == (behind, note)
    assert [h["id"] for h in answers[1]["episodes"]] == [dog]
    assert sorted((p.relative_to(root), p.stat().st_size) for p in root.rglob("*")) == before
