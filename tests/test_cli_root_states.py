"""CLI commands on a root in an unusual state (never indexed, invalid ``ome.toml``, a daemon
serving it): each says what is true, exits accordingly and leaves nothing half-made."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli
from everos_reflect.engine.engine import Engine
from everos_reflect.index.db import db_path
from tests.daemon_lock import serve_lock

pytestmark = pytest.mark.usefixtures("no_everos_env")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root with one Episode that no command has indexed yet."""
    path = tmp_path / "root"
    assert run("init", str(path)).exit_code == 0
    added = run("add", "--root", str(path), "--user", "u1", "--subject", "S",
                "--content", "hello world", "--timestamp", "2026-10-12T10:00:00+00:00")
    assert added.exit_code == 0, added.output
    assert not db_path(path).exists()
    return path


def episodes(root: Path) -> dict[str, object]:
    result = run("status", "--root", str(root), "--json")
    doc = json.loads(result.stdout)
    return {"from": doc["counts_from"], "live": doc["totals"]["episode"]["live"]}


@pytest.mark.parametrize("name", ["reflect_episodes", "no_such_strategy"])
def test_trigger_refused_on_a_never_indexed_root_leaves_no_index(root: Path, name: str) -> None:
    result = run("trigger", name, "--root", str(root))
    assert result.exit_code in (1, 4), result.output
    assert not db_path(root).exists()
    assert episodes(root) == {"from": "markdown", "live": 1}


def test_status_counts_from_the_markdown_while_an_empty_index_holds_no_log(root: Path) -> None:
    from everos_reflect.index import db as dbmod

    dbmod.connect(root).close()  # made by an older version, or any command that opened it
    assert episodes(root) == {"from": "markdown", "live": 1}
    text = run("status", "--root", str(root)).stdout
    assert "index: not built yet" in text
    # once built, the index is read
    assert run("reindex", "--root", str(root)).exit_code == 0
    assert episodes(root) == {"from": "index", "live": 1}


def test_reports_on_a_never_indexed_root_leaves_no_index(root: Path) -> None:
    result = run("reports", "--root", str(root), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout) == {"reports": []}
    assert not db_path(root).exists()


# --- an invalid ome.toml, with and without a daemon serving the root ---------------------------

BROKEN = "[strategies.reflect_episodes]\nenabled = \n"


@contextmanager
def daemon_on(root: Path, *, first_ome: str) -> Iterator[Engine]:
    """An API server serving ``root`` as ``serve`` does, advertised in ``daemon.json``: its
    engine loaded ``first_ome`` (then the file is the caller's to change). Yields its pid as
    advertised as pid 1 (alive, and not this process, which a client never asks); yields its
    engine."""
    import uvicorn

    from everos_reflect.api.app import create_app
    from everos_reflect.embedding import HashEmbedder
    from everos_reflect.engine.daemon import write_daemon
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings

    (root / "ome.toml").write_text(first_ome)
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(16))
    engine = Engine(runtime, recover=False)
    engine.reload_config()
    server = uvicorn.Server(uvicorn.Config(create_app(runtime, engine), host="127.0.0.1",
                                           port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive()
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        write_daemon(root, {"pid": 1, "host": "127.0.0.1", "port": port, "root": str(root)})
        with serve_lock(root):
            yield engine
    finally:
        server.should_exit = True
        thread.join(10)
        runtime.close()


def enabled(rows: list[dict[str, object]]) -> dict[object, object]:
    return {r["name"]: r["enabled"] for r in rows if r["name"] in
            ("reflect_episodes", "revalidate_insights")}


def test_strategies_and_status_show_what_the_daemon_runs_on_its_last_good_config(
        root: Path) -> None:
    good = "[strategies.reflect_episodes]\nenabled = true\n"
    with daemon_on(root, first_ome=good) as engine:
        (root / "ome.toml").write_text(BROKEN)
        assert engine.reload_config() is False  # the daemon keeps its last good config

        listed = run("strategies", "--root", str(root), "--json")
        assert listed.exit_code == 0, listed.output
        doc = json.loads(listed.stdout)
        rows = doc["strategies"]
        assert enabled(rows) == {"reflect_episodes": True, "revalidate_insights": False}
        # which configuration is in force, said once, not on every row
        assert {r["via"] for r in rows} == {"daemon"} and doc["config"]["in_force"] == (
            "last_good")
        assert not any("config_in_force" in r for r in rows)
        [note] = listed.stderr.splitlines()
        assert note.startswith("note: invalid ome.toml: line 2: ")
        assert note.endswith("the daemon (pid 1) runs on its last good configuration, shown "
                             "here, until it is fixed")

        status = run("status", "--root", str(root), "--json")
        assert status.exit_code == 0, status.output
        assert enabled(json.loads(status.stdout)["strategies"]) == enabled(rows)
        assert status.stderr.splitlines() == [note]
        text = run("status", "--root", str(root))
        assert text.exit_code == 0 and note in text.stderr


def test_strategies_and_status_without_a_daemon_say_the_config_is_invalid_and_exit_1(
        root: Path) -> None:
    (root / "ome.toml").write_text(BROKEN)
    for command in ("strategies", "status"):
        result = run(command, "--root", str(root), "--json")
        assert result.exit_code == 1, result.output
        json.loads(result.stdout)  # the report is still given
        [line] = result.stderr.splitlines()
        assert line.startswith("error: invalid ome.toml: line 2: ")
        assert line.endswith("no strategy runs until it is fixed (a daemon started now would "
                             "run none; every strategy is shown off)")
    # fixed: nothing to say
    (root / "ome.toml").write_text("")
    assert run("strategies", "--root", str(root)).stderr == ""


def test_trigger_through_the_daemon_says_it_went_by_its_last_good_config(root: Path) -> None:
    good = "[strategies.reflect_episodes]\nenabled = true\n"
    with daemon_on(root, first_ome=good) as engine:
        (root / "ome.toml").write_text(BROKEN)
        assert engine.reload_config() is False

        result = run("trigger", "reflect_episodes", "--root", str(root))
        assert result.exit_code == 0, result.output  # enabled in the config the daemon runs
        assert result.stdout.rstrip().endswith("[daemon]")
        assert result.stderr.splitlines() == [
            "note: invalid ome.toml: line 2: TOML syntax error: "
            "Invalid value; the daemon went by its last good configuration"]

        (root / "ome.toml").write_text(good)  # valid again: nothing to say
        assert engine.reload_config() is True
        again = run("trigger", "reflect_episodes", "--root", str(root))
        assert again.exit_code == 0 and again.stderr == "", again.output


def test_status_names_an_index_it_cannot_read_and_exits_1(root: Path) -> None:
    # it counted from the Markdown and said "index: not built yet (run `everos-reflect
    # reindex` or `serve`)", exit 0, of a root whose system.db was junk
    db = db_path(root)
    db.parent.mkdir(parents=True)
    db.write_bytes(b"not a database at all" * 100)

    result = run("status", "--root", str(root), "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)  # the report is still given
    assert (doc["counts_from"], doc["totals"]["episode"]["live"]) == ("markdown", 1)
    assert doc["index"]["error"].startswith(f"{db} is not a readable SQLite database")
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: the index cannot be read: {db} is not a readable SQLite")
    text = run("status", "--root", str(root))
    assert text.exit_code == 1
    assert "not built yet" not in text.stdout
    assert f"index: {db} is not a readable SQLite database" in text.stdout


def test_status_with_an_invalid_everos_toml_says_no_strategy_runs_unless_a_daemon_does(
        root: Path) -> None:
    # it showed "reflect_episodes yes, next run Monday 02:00", exit 0, while `serve` refused
    # to start on that everos.toml
    good = "[strategies.reflect_episodes]\nenabled = true\n"
    (root / "ome.toml").write_text(good)
    (root / "everos.toml").write_text("[server]\nport = 'x'\n")
    problem = ("invalid configuration: everos.toml: server.port: must be an "
               'integer, got a string: "x"')

    alone = run("status", "--root", str(root), "--json")
    assert alone.exit_code == 1, alone.output
    assert alone.stderr.splitlines() == [
        f"error: {problem}; no strategy runs until it is fixed (`serve` does not start)"]

    (root / "everos.toml").write_text("")
    with daemon_on(root, first_ome=good):  # started before everos.toml broke
        (root / "everos.toml").write_text("[server]\nport = 'x'\n")
        served = run("status", "--root", str(root), "--json")
        assert served.exit_code == 0, served.output
        assert served.stderr.splitlines() == [
            f"note: {problem}; the daemon serving this root runs on the settings it started "
            "with"]
        assert enabled(json.loads(served.stdout)["strategies"])["reflect_episodes"] is True


def test_clusters_says_its_holds_follow_the_shipped_settings_while_ome_toml_is_invalid(
        root: Path) -> None:
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nremerge_undone = true\n"
                                   "enabled = \n")
    result = run("clusters", "--root", str(root), "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["clusters"]) == 1
    assert result.stderr.splitlines() == [
        "note: invalid ome.toml: line 3: TOML syntax error: Invalid "
        "value; clusters are held back as under the shipped reflect_episodes settings (a "
        "daemon runs on its last good ones)"]


# --- a file where a folder of the index goes -------------------------------------------------

READERS = [["reports"], ["reports", "--json"], ["status"], ["status", "--json"], ["runs"],
           ["clusters"], ["search", "hello"], ["lint"]]


@pytest.mark.parametrize("args", READERS, ids=" ".join)
def test_a_file_where_the_sqlite_folder_goes_fails_each_reader_naming_it(
        root: Path, args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # `reports` said "No Reflection reports yet", `status` "index: not built yet" and `lint`
    # "0 errors", exit 0: the audit was out of reach, not missing; the others said
    # "File exists: …/.index/sqlite"
    from everos_reflect import embedding
    from everos_reflect.embedding import HashEmbedder

    monkeypatch.setattr(embedding, "make_embedder", lambda settings: HashEmbedder(16))
    (root / ".index" / "sqlite").write_bytes(b"")

    result = run(*args, "--root", str(root))
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "not built yet" not in result.stdout and "No Reflection" not in result.stdout
    assert "File exists" not in result.output
    named = f"{root / '.index' / 'sqlite'} is not a folder"
    assert named in (result.stdout if args[0] == "lint" else result.stderr.splitlines()[-1])


@pytest.mark.parametrize("folder", ["locks", "lancedb"])
def test_status_and_add_name_a_file_where_an_index_folder_goes(root: Path, folder: str) -> None:
    # status said "index: [Errno 17] File exists: '…/.index/locks'", and "index: up to date",
    # exit 0, for a file where .index/lancedb goes while every search failed on it
    assert run("reindex", "--root", str(root)).exit_code == 0
    where = root / ".index" / folder
    shutil.rmtree(where)
    where.write_bytes(b"")

    result = run("status", "--root", str(root), "--json")
    assert result.exit_code == 1
    said = f".index/{folder} is not a folder, and a folder is needed there: move it aside"
    assert json.loads(result.stdout)["index"] == {"error": said}
    assert result.stderr.splitlines() == [f"error: the index cannot be read: {said}"]
    added = run("add", "--root", str(root), "--user", "u1", "--subject", "S", "--content", "c")
    if folder == "locks":  # a log is written under its lock: nothing can be added
        assert (added.exit_code, added.stderr) == (1, f"error: {said}\n")
    else:  # the log is written all the same; the vectors are rebuilt from it
        assert (added.exit_code, added.stderr) == (0, "")
