"""A log the index cannot read leaves the index exactly as a ``reindex`` of the same Markdown:
its frontmatter broken by a hand edit (invalid YAML, not closed, missing, a newer
``schema_version``), over ``limits.max_file_bytes``, not UTF-8, a symlink leading out of the
root, or one entry block broken inside a good log. The live sync kept every row it had
indexed from it (searchable, clustered) while a rebuild had none. ``status`` and ``lint``
name the file and why; fixed by hand, its entries come back as a ``reindex`` gives them."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.test_sync_state_machine import fingerprint
from tests.waiting import scripted_pauses

REF = UserRef.of("u_ann")
DEV = UserRef.of("u_dev")
DAY = date(2026, 10, 12)
LIMIT = 4096  # bytes a log may have (limits.max_file_bytes), in everos.toml for lint too
ENTRY_LIMIT = 1024  # bytes an entry may have (limits.max_entry_bytes), the same way
SECOND = "ep_20261012_0002"


def _yaml_typo(text: str) -> str:
    at = text.index(f"<!-- entry:{SECOND} -->")
    return text[:at] + text[at:].replace("owner_id: u_ann", "owner_id: [u_ann", 1)


def _too_long(text: str) -> str:
    at = text.index(f"<!-- entry:{SECOND} -->")
    return text[:at] + text[at:].replace("at 8.", "at 8. " + "Woof. " * (ENTRY_LIMIT // 6), 1)


#: how a log is made unreadable (its text → the broken text, or None: done on the path) and
#: the words ``status`` and ``lint`` name it with
BREAKS: dict[str, tuple[Callable[[str], str | None] | None, str]] = {
    "invalid YAML": (lambda t: t.replace("type: episode_daily", "type: [episode_daily", 1),
                     "file frontmatter: invalid YAML"),
    "not closed": (lambda t: t.replace("---\n<!--", "<!--", 1),
                   "file frontmatter: invalid YAML"),
    "missing": (lambda t: t[t.index("<!--"):], "missing file frontmatter"),
    "newer schema": (lambda t: t.replace("schema_version: 1", "schema_version: 9", 1),
                     "unsupported schema_version 9"),
    "over the size limit": (lambda t: t + "<!-- padding -->\n" * (LIMIT // 17 + 1),
                            "over limits.max_file_bytes"),
    "not UTF-8": (None, "not valid UTF-8"),
    "symlink out of the root": (None, "symlink leading outside the memory root"),
    "an entry's metadata": (_yaml_typo, SECOND),
    "an entry's closing marker lost": (
        lambda t: t.replace(f"<!-- /entry:{SECOND} -->\n", "", 1), SECOND),
    "the text ends inside an entry": (lambda t: t[:t.index(f"<!-- /entry:{SECOND} -->")],
                                      SECOND),
    "an entry over the size limit": (_too_long, "over limits.max_entry_bytes"),
}


def _runtime(root: Path) -> Runtime:
    settings = Settings()
    limits = replace(settings.limits, max_file_bytes=LIMIT, max_entry_bytes=ENTRY_LIMIT)
    return Runtime(root, replace(settings, limits=limits), embedder=HashEmbedder(16))


def _clustered(rt: Runtime) -> set[str]:
    return {r[0] for r in rt.db().execute("SELECT entry_id FROM cluster_members")}


def _as_a_reindex_leaves_it(rt: Runtime, copy: Path) -> None:
    """The index of ``rt`` equals that of a ``reindex`` of a copy of its Markdown (entries,
    files and their problems, vectors, cluster members)."""
    shutil.copytree(rt.root, copy, symlinks=True, ignore=shutil.ignore_patterns(".index"))
    fresh = _runtime(copy)
    try:
        Indexer(fresh).reindex()
        assert fingerprint(rt, set()) == fingerprint(fresh, set())
        assert _clustered(rt) == _clustered(fresh)
    finally:
        fresh.close()


@pytest.mark.parametrize("how", list(BREAKS))
def test_a_sync_leaves_a_log_it_cannot_read_as_a_reindex_does(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    scripted_pauses(monkeypatch, [])  # the log stands still through every settle wait
    (root / "everos.toml").write_text(f"[limits]\nmax_file_bytes = {LIMIT}\n"
                                      f"max_entry_bytes = {ENTRY_LIMIT}\n")
    rt = _runtime(root)
    try:
        ids = [rt.store.append(REF, Kind.EPISODE,
                               {"timestamp": f"2026-10-12T0{h}:00:00+00:00"},
                               {"Subject": "Dogs", "Content": f"Ann walked her dogs at {h}."},
                               day=DAY).id for h in (7, 8, 9)]
        other = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-13T09:00:00+00:00"},
                                {"Subject": "Dogs", "Content": "Ann walked her dogs again."},
                                day=date(2026, 10, 13)).id
        path = rt.store.log_path(REF, Kind.EPISODE, DAY)
        rel = rt.store.rel(path)
        Indexer(rt).scan()
        assert _clustered(rt) == {*ids, other}
        good = path.read_bytes()
        breaking, reason = BREAKS[how]
        if breaking is not None:
            path.write_text(breaking(good.decode()) or "", "utf-8")
        elif how == "not UTF-8":
            path.write_bytes(good + b"\xff\xfe stray bytes\n")
        else:
            away = tmp_path / "elsewhere" / path.name
            away.parent.mkdir()
            away.write_bytes(good)
            path.unlink()
            path.symlink_to(away)

        Indexer(rt).sync_path(path)  # the watcher's sync of the edit

        _as_a_reindex_leaves_it(rt, tmp_path / "broken")
        indexed = {r[0] for r in rt.db().execute("SELECT id FROM entries")}
        assert SECOND not in indexed and other in indexed
        status = CliRunner().invoke(cli, ["status", "--root", str(root), "--json"])
        [named] = json.loads(status.stdout)["files_with_problems"]
        assert named["file"] == rel and any(reason in p for p in named["problems"])
        lint = CliRunner().invoke(cli, ["lint", "--root", str(root)])
        assert lint.exit_code == 1 and f"{rel}:" in lint.stdout and reason in lint.stdout

        if path.is_symlink():
            path.unlink()
        path.write_bytes(good)  # fixed by hand
        Indexer(rt).sync_path(path)

        _as_a_reindex_leaves_it(rt, tmp_path / "fixed")
        assert {r[0] for r in rt.db().execute("SELECT id FROM entries")} == {*ids, other}
        assert _clustered(rt) == {*ids, other}
    finally:
        rt.close()


class _Killed(BaseException):
    """The process dies here: nothing after it runs (no ``except Exception`` catches it)."""


@pytest.mark.parametrize("killed", [False, True])
def test_an_entry_deleted_while_its_log_could_not_be_read_makes_the_insight_stale(
        root: Path, monkeypatch: pytest.MonkeyPatch, killed: bool) -> None:
    """Its rows dropped while the log could not be read, an entry removed in the same save
    that fixed the log left no row to see go: the insight citing it stayed active. The sync
    that finds the log's problem gone checks the owner's records whole, and a process killed
    before it told anyone leaves that check noted for the next sync."""
    from everos_reflect.index import events
    from tests.test_provenance import setup, status

    scripted_pauses(monkeypatch, [])
    rt, eps, first, _ = setup(root)  # one Episode a log, an insight citing the three
    path = rt.store.path_for_id(DEV, eps[1].id)
    whole = path.read_text()
    path.write_text(whole.replace("type: episode_daily", "type: [episode_daily", 1))
    assert Indexer(rt).sync_path(path).deleted == 1
    assert status(rt, first.id) == ("active", None)  # unknown while it cannot be read

    start, end = whole.index("<!-- entry:"), whole.index("<!-- /entry:")
    path.write_text(whole[:start] + whole[whole.index("\n", end) + 1:])  # fixed, and the
    # Episode deleted: no row of it is left to delete, nothing of the log to upsert
    if killed:
        def die(*args: object, **kwargs: object) -> set[Path]:
            raise _Killed

        with monkeypatch.context() as patch:
            patch.setattr(events, "publish_many", die)
            with pytest.raises(_Killed):
                Indexer(rt).sync_path(path)
        assert status(rt, first.id) == ("active", None)  # nobody was told yet
        assert Indexer(rt).pending()["files_changed"] == 0  # the log reads as synced
        Indexer(rt).scan()  # the next sync hands the change over
    else:
        Indexer(rt).sync_path(path)
    assert status(rt, first.id) == ("stale", f"evidence {eps[1].id} was deleted")
