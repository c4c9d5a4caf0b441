"""A FIFO (or device) named like a daily log is refused at once, never opened blocking."""

from __future__ import annotations

import os
import shutil
import threading
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings


def _within(seconds: float, work: object) -> list[object]:
    """Run ``work`` in a thread; fail (instead of hanging the suite) if it blocks."""
    outcome: list[object] = []

    def target() -> None:
        try:
            outcome.append(work())  # type: ignore[operator]
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked on the FIFO"
    return outcome


@pytest.fixture
def fifo(root: Path) -> tuple[Runtime, Path]:
    folder = root / "default_app/default_project/users/u1/episodes"
    folder.mkdir(parents=True)
    path = folder / "episode-2026-10-12.md"
    os.mkfifo(path)
    return Runtime(root, Settings(), embedder=HashEmbedder(16)), path


def test_reading_a_fifo_named_like_a_log_fails_at_once(fifo: tuple[Runtime, Path]) -> None:
    rt, path = fifo
    (outcome,) = _within(10, lambda: rt.store.read(path))
    assert isinstance(outcome, OSError) and "not a regular file" in str(outcome)


def test_syncing_a_fifo_named_like_a_log_skips_it_at_once(fifo: tuple[Runtime, Path]) -> None:
    rt, path = fifo
    (outcome,) = _within(10, lambda: Indexer(rt).sync_path(path))
    assert not isinstance(outcome, Exception)
    assert rt.db().execute("SELECT COUNT(*) FROM files").fetchone()[0] == 0


def test_lint_names_a_folder_or_fifo_standing_where_a_log_goes(
        fifo: tuple[Runtime, Path]) -> None:
    """`lint` said ok (exit 0) over a folder or FIFO named like a log: it skipped them without
    a word, while every write to that log (add, a merge, undo) failed on them."""
    from everos_reflect.lint import lint_report

    rt, path = fifo
    (path.parent / "episode-2026-10-13.md").mkdir()
    facts = path.parent.parent / ".atomic_facts" / "atomic_fact-2026-10-12.md"
    facts.mkdir(parents=True)
    report = _within(10, lambda: lint_report(rt.root))[0]
    assert isinstance(report, dict) and report["ok"] is False
    found = {(p["file"].rsplit("/", 2)[-2:][-1], p["message"].split(" where")[0])
             for p in report["problems"]}
    assert found == {("episode-2026-10-12.md", "a FIFO (named pipe)"),
                     ("episode-2026-10-13.md", "a folder"),
                     ("atomic_fact-2026-10-12.md", "a folder")}
    assert all("where a daily log goes: not read" in p["message"] for p in report["problems"])


def test_lint_names_a_file_standing_where_a_folder_of_logs_goes(root: Path) -> None:
    """`users/eve/episodes` as a file: every `add` for eve failed ("Not a directory") while
    `lint` said ok."""
    from everos_reflect.lint import lint_report

    user = root / "default_app/default_project/users/eve"
    user.mkdir(parents=True)
    (user / "episodes").write_text("not a folder")
    (user / ".insights").write_text("nor this")
    report = lint_report(root)
    assert report["ok"] is False
    assert [(p["file"].rsplit("/", 1)[-1], p["message"].split(":")[0])
            for p in report["problems"]] == [
        (".insights", "a file where the .insights folder goes"),
        ("episodes", "a file where the episodes folder goes")]


def _stray_files(root: Path) -> None:
    """Files among user and project folders (a README, a file named like a user), a file
    where a project's ``users`` folder goes, and a hidden file (not reported)."""
    users = root / "default_app/default_project/users"
    users.mkdir(parents=True)
    (users / "eve").write_text("meant to be eve's folder")
    (users / "README.md").write_text("who is who")
    (users / ".DS_Store").write_text("hidden: not reported")
    (root / "other_app/other_project").mkdir(parents=True)
    (root / "other_app/other_project/users").write_text("not a folder")
    (root / "default_app/NOTES.txt").write_text("about this app")


#: (file, severity, message up to its first colon)
STRAYS = [("default_app/NOTES.txt", "warning", "a file where a project folder goes"),
          ("default_app/default_project/users/README.md", "warning",
           "a file where a user folder goes"),
          ("default_app/default_project/users/eve", "warning", "a file where a user folder goes"),
          ("other_app/other_project/users", "error", "a file where the users folder goes")]


def test_lint_warns_of_a_file_among_user_folders_and_errs_where_users_goes(root: Path) -> None:
    """A README in a users folder is harmless: a warning naming it (nothing in it is read).
    A file where a project's `users` folder goes blocks every write there: an error. `lint`
    said "0 files checked, ok" of both."""
    from everos_reflect.lint import lint_report

    _stray_files(root)
    report = lint_report(root)
    assert report["ok"] is False
    assert [(p["file"], p["severity"], p["message"].split(":")[0])
            for p in report["problems"]] == STRAYS
    assert all(p["message"].endswith("move it away if it holds memory")
               for p in report["problems"] if p["severity"] == "warning")


def test_lint_errs_on_a_file_where_the_default_project_folder_goes(root: Path) -> None:
    """`add` without --app/--project writes under default_app/default_project: a file there
    makes every such write fail, so it is an error, not a warning."""
    from everos_reflect.lint import lint_report

    (root / "default_app").mkdir()
    (root / "default_app/default_project").write_text("not a folder")
    (root / "default_app/other_project").write_text("not a folder either")
    problems = lint_report(root)["problems"]
    assert [(p["file"], p["severity"]) for p in problems] == [
        ("default_app/default_project", "error"), ("default_app/other_project", "warning")]
    assert problems[0]["message"].startswith("a file where the default project's folder goes")


def test_lint_cli_exits_1_on_a_stray_file_alone_and_calls_it_a_warning(root: Path) -> None:
    from click.testing import CliRunner

    from everos_reflect.cli.store_cmds import lint_cmd

    (root / "default_app/default_project/users").mkdir(parents=True)
    (root / "default_app/default_project/users/README.md").write_text("who is who")
    result = CliRunner().invoke(lint_cmd, ["--root", str(root)])
    assert result.exit_code == 1, result.output
    assert "users/README.md: a file where a user folder goes" in result.stdout
    assert result.stdout.rstrip().endswith("0 files checked, 0 errors, 1 warning")


def test_status_names_stray_files_among_user_folders(root: Path) -> None:
    """From the logs and from the index alike: the `users` file among the files with problems,
    the others among the files with warnings."""
    from everos_reflect.status import status_document

    _stray_files(root)
    rt = Runtime(root, Settings(), embedder=HashEmbedder(16))
    rt.store.append(UserRef.of("u1"), Kind.EPISODE, {"timestamp": "2026-10-11T09:00:00Z"},
                    {"Subject": "s", "Content": "c"}, day=date(2026, 10, 11))
    for index in (False, True):
        if index:
            Indexer(rt).scan()
        doc = status_document(rt, strategies=[])
        assert doc["counts_from"] == ("index" if index else "markdown")
        found = [(f["file"], f["problems"][0].split(":")[0].strip())
                 for f in doc["files_with_problems"]]
        assert found == [(f, m) for f, sev, m in STRAYS if sev == "error"]
        assert [w["file"] for w in doc["files_with_warnings"]
                if "/u1/" not in w["file"]] == [f for f, sev, _ in STRAYS if sev == "warning"]
    rt.close()


def test_status_from_the_index_names_what_stands_where_a_log_or_its_folder_goes(
        fifo: tuple[Runtime, Path]) -> None:
    """`status` counts from the index once there is one, and only `lint` listed these: a path
    that is no log is in no index, so `status` said nothing of a log nobody could write."""
    from everos_reflect.model import Kind, UserRef
    from everos_reflect.status import status_document

    rt, path = fifo
    rt.store.append(UserRef.of("u1"), Kind.EPISODE, {"timestamp": "2026-10-11T09:00:00Z"},
                    {"Subject": "s", "Content": "c"}, day=date(2026, 10, 11))
    Indexer(rt).scan()
    (path.parent / "episode-2026-10-13.md").mkdir()
    (path.parent.parent / ".insights").write_text("not a folder")
    doc = _within(10, lambda: status_document(rt, strategies=[]))[0]
    assert isinstance(doc, dict) and doc["counts_from"] == "index"
    assert doc["totals"]["episode"] == {"live": 1, "deprecated": 0}
    found = [(f["file"].rsplit("/", 1)[-1], f["problems"][0].split(" where")[0])
             for f in doc["files_with_problems"]]
    assert found == [(".insights", "a file"),
                     ("episode-2026-10-12.md", "a FIFO (named pipe)"),
                     ("episode-2026-10-13.md", "a folder")]
    rt.close()


@pytest.mark.parametrize("what", ["folder", "fifo"])
@pytest.mark.parametrize("how", ["sync_path", "scan"])
def test_a_log_replaced_by_a_folder_or_fifo_leaves_the_index_as_a_deleted_log(
        root: Path, what: str, how: str) -> None:
    """`rm log; mkdir log`: the watcher's sync and every reconcile scan skipped the path as
    unreadable, so its entries stayed searchable and clustered for good, while a reindex
    (regular files only) dropped them."""
    from datetime import date

    from everos_reflect.model import Kind, UserRef

    rt = Runtime(root, Settings(), embedder=HashEmbedder(16))
    ref, day = UserRef.of("u1"), date(2026, 10, 12)
    rt.store.append(ref, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00",
                                        "parent_type": "memcell"},
                    {"Subject": "Pets", "Content": "Andrew adopted a dog named Toby."}, day=day)
    indexer = Indexer(rt)
    indexer.scan()
    path = rt.store.log_path(ref, Kind.EPISODE, day)
    path.unlink()
    path.mkdir() if what == "folder" else os.mkfifo(path)
    _within(10, lambda: indexer.sync_path(path) if how == "sync_path" else indexer.scan())
    db = rt.db()
    assert db.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM files").fetchone()[0] == 0
    assert indexer.pending()["files_deleted"] == 0  # not behind for ever
    assert rt.vectors.count(Kind.EPISODE) == 0
    rt.close()


# --- configuration files: a FIFO, a device or a huge file is a config problem, never a hang ---


def _plant(path: Path, what: str) -> None:
    if what == "fifo":
        os.mkfifo(path)
    elif what == "device":
        path.symlink_to("/dev/zero")  # never ends: read whole, it filled the memory
    else:  # a regular file far past any real configuration
        path.write_text("# padding\n" * 200_000, encoding="utf-8")


HOSTILE = ["fifo", "device", "huge"]
REASONS = {"fifo": "not a regular file", "device": "not a regular file",
           "huge": "larger than 1,048,576 bytes"}


@pytest.mark.parametrize("what", HOSTILE)
def test_an_everos_toml_that_is_not_a_small_regular_file_is_a_config_error(
        root: Path, what: str) -> None:
    from everos_reflect.errors import ConfigError
    from everos_reflect.settings import load_settings

    _plant(root / "everos.toml", what)
    (outcome,) = _within(10, lambda: load_settings(root, env={}))
    assert isinstance(outcome, ConfigError), outcome
    assert f"everos.toml: (file): {REASONS[what]}" in str(outcome)


@pytest.mark.parametrize("what", HOSTILE)
def test_an_ome_toml_that_is_not_a_small_regular_file_keeps_the_last_good_config(
        root: Path, what: str) -> None:
    # The daemon's hot reload read it with read_bytes(): a FIFO hung the reload (and every CLI
    # command reading the strategies) for ever.
    from everos_reflect.engine.engine import Engine

    engine = Engine(Runtime(root, Settings(), embedder=HashEmbedder(16)))
    assert engine.reload_config(force=True)
    good = engine.config()
    _plant(root / "ome.toml", what)
    (outcome,) = _within(10, lambda: engine.reload_config(force=True))
    assert outcome is False
    assert engine.config_error is not None and REASONS[what] in engine.config_error
    assert engine.config() == good


def test_toggling_a_strategy_in_a_fifo_ome_toml_is_one_error_line(root: Path) -> None:
    from click.testing import CliRunner

    from everos_reflect.cli.main import cli

    _plant(root / "ome.toml", "fifo")
    (result,) = _within(10, lambda: CliRunner().invoke(
        cli, ["enable", "reflect_episodes", "--root", str(root)]))
    assert result.exit_code == 1, result.output  # type: ignore[attr-defined]
    assert "ome.toml: not a regular file" in result.output  # type: ignore[attr-defined]


def test_a_fifo_planted_as_daemon_json_is_no_daemon(root: Path) -> None:
    # Every command asks whether a daemon serves the root; a FIFO there hung all of them.
    from everos_reflect.engine.daemon import daemon_file, read_daemon

    daemon_file(root).parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(daemon_file(root))
    (outcome,) = _within(10, lambda: read_daemon(root))
    assert outcome is None


@pytest.mark.parametrize("folder", ["episodes", "users"])
def test_a_log_whose_folder_became_a_file_leaves_the_index_and_reflection_runs(
        root: Path, folder: str) -> None:
    """`users` (or `episodes`) replaced by a file: the path through it raised
    NotADirectoryError, which the sync and every scan skipped as unreadable, so the logs'
    entries stayed indexed and every Reflection run failed reading them."""
    from everos_reflect.engine.engine import Engine
    from tests.fleet_support import build_root, open_test_root

    build_root(root, ome="[strategies.reflect_episodes]\nenabled = true\n")
    rt = open_test_root(str(root))
    user = rt.store.user_dir(UserRef.of("u_00"))
    gone = user / "episodes" if folder == "episodes" else user.parent
    shutil.rmtree(gone)
    gone.write_text("not a folder")
    Indexer(rt).scan()
    assert rt.db().execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0
    assert Engine(rt).trigger("reflect_episodes", timeout=None).status == "ok"
    rt.close()


def test_lint_warns_of_markdown_in_a_log_folder_that_no_reader_opens(root: Path) -> None:
    """A person's copy ("episode-2026-10-12 (copy).md"), a date typed without its zero
    ("episode-2026-10-5.md") or a fact log dropped among the Episodes: nothing reads them, so
    their entries were in no index, search or merge, and `lint` said 0 errors, exit 0."""
    from everos_reflect.lint import lint_report

    episodes = root / "default_app/default_project/users/u1/episodes"
    episodes.mkdir(parents=True)
    log = ("---\ntype: episode_daily\nschema_version: 1\nuser_id: u1\n"
           "date: '2026-10-12'\n---\n")
    for name in ("episode-2026-10-12.md", "episode-2026-10-12 (copy).md",
                 "episode-2026-10-5.md", "Episode-2026-10-13.MD", "atomic_fact-2026-10-12.md",
                 ".#episode-2026-10-12.md", "episode-2026-10-12.md~", "notes.txt"):
        (episodes / name).write_text(log)
    report = lint_report(root)
    assert report["ok"] is False and report["files_checked"] == 1
    got = [(p["file"].rsplit("/", 1)[-1], p["message"], p["severity"])
           for p in report["problems"]]
    named = "not read: the episodes folder's logs are named episode-YYYY-MM-DD.md"
    assert got == [
        ("Episode-2026-10-13.MD", named, "warning"),
        ("atomic_fact-2026-10-12.md", "not read: named like a log of .atomic_facts/, not of "
         "episodes/", "warning"),
        ("episode-2026-10-12 (copy).md", named, "warning"),
        ("episode-2026-10-5.md", named, "warning")]


def _top_files(root: Path) -> None:
    """Markdown a user may take for memory at the top of the root, beside files that belong
    there or are no Markdown (not reported)."""
    (root / "notes.md").write_text("# things to remember")
    (root / "2026-01-01.md").write_text("a day's log, in the wrong place")
    for name in ("README.md", "everos.toml", "ome.toml", "fleet.toml", ".gitignore"):
        (root / name).write_text("")


TOP = ["2026-01-01.md", "notes.md"]


def test_lint_warns_of_markdown_at_the_top_of_the_root_which_is_never_read(
        root: Path) -> None:
    from everos_reflect.lint import lint_report

    _top_files(root)
    problems = lint_report(root)["problems"]
    assert [(p["file"], p["severity"]) for p in problems] == [(f, "warning") for f in TOP]
    assert problems[1]["message"] == (
        "a file at the top of the memory root: not read (memory is read only from the daily "
        "logs under <app>/<project>/users/<user>/)")


def test_lint_errs_on_a_file_where_the_default_app_folder_goes(root: Path) -> None:
    from everos_reflect.lint import lint_report

    (root / "default_app").write_text("not a folder")
    (problem,) = lint_report(root)["problems"]
    assert (problem["file"], problem["severity"]) == ("default_app", "error")
    assert problem["message"].startswith("a file where the default app's folder goes")


def test_status_counts_markdown_at_the_top_of_the_root_as_warnings(root: Path) -> None:
    from everos_reflect.status import status_document

    _top_files(root)
    rt = Runtime(root, Settings(), embedder=HashEmbedder(16))
    rt.store.append(UserRef.of("u1"), Kind.EPISODE, {"timestamp": "2026-10-11T09:00:00Z"},
                    {"Subject": "s", "Content": "c"}, day=date(2026, 10, 11))
    for index in (False, True):
        if index:
            Indexer(rt).scan()
        doc = status_document(rt, strategies=[])
        assert doc["counts_from"] == ("index" if index else "markdown")
        assert doc["files_with_problems"] == []
        assert [w["file"] for w in doc["files_with_warnings"] if "/" not in w["file"]] == TOP
    rt.close()
