"""Nothing reads outside the root: symlinks that leave it are reported, never followed."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli import index_cmds
from everos_reflect.cli.common import existing_root
from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import MarkdownError
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

ANN = UserRef.of("u_ann")
USERS = "default_app/default_project/users"
SECRET_LOG = """\
---
type: episode_daily
schema_version: 1
user_id: u_ann
date: '2026-10-12'
---
<!-- entry:ep_20261012_0001 -->
---
owner_id: u_ann
timestamp: 2026-10-12T09:00:00+00:00
parent_type: memcell
---
## Subject
SECRET subject

## Content
SECRET-TOKEN-4711 from outside the root
<!-- /entry:ep_20261012_0001 -->
"""


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_open(root: str | None) -> Runtime:
        return Runtime(existing_root(root), Settings(), embedder=HashEmbedder(32))

    monkeypatch.setattr(index_cmds, "open_runtime", fake_open)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "elsewhere"
    (folder / "episodes").mkdir(parents=True)
    (folder / "episodes" / "episode-2026-10-12.md").write_text(SECRET_LOG)
    return folder


def runtime(root: Path) -> Runtime:
    return Runtime(root, Settings(), embedder=HashEmbedder(32))


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def linked_file(root: Path, outside: Path) -> Path:
    """A log that is a symlink to a log outside the root (a good neighbour beside it)."""
    rt = runtime(root)
    rt.store.append(ANN, Kind.EPISODE, {"timestamp": "2026-10-11T09:00:00+00:00",
                                          "parent_type": "memcell"},
                    {"Subject": "Cats", "Content": "Ann has a cat."},
                    day=date(2026, 10, 11))
    link = root / USERS / "u_ann/episodes/episode-2026-10-12.md"
    link.symlink_to(outside / "episodes" / "episode-2026-10-12.md")
    return link


def test_lint_reports_a_file_symlink_out_of_the_root_and_never_reads_it(
    root: Path, outside: Path
) -> None:
    link = linked_file(root, outside)
    result = run("lint", "--root", str(root), "--json")
    assert result.exit_code == 1
    assert "SECRET" not in result.output
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["file"] == f"{USERS}/u_ann/episodes/{link.name}"
    assert problem["message"].startswith("symlink leading outside the memory root")


def test_lint_reports_a_symlinked_user_folder_out_of_the_root(
    root: Path, outside: Path
) -> None:
    (root / USERS).mkdir(parents=True)
    (root / USERS / "u_evil").symlink_to(outside, target_is_directory=True)
    result = run("lint", "--root", str(root), "--json")
    assert result.exit_code == 1 and "SECRET" not in result.output
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["file"] == f"{USERS}/u_evil"
    assert list(runtime(root).store.iter_users()) == []


def test_a_symlinked_app_folder_out_of_the_root_is_skipped(root: Path, tmp_path: Path,
                                                           outside: Path) -> None:
    app = tmp_path / "app_out" / "default_project" / "users" / "u_ann"
    app.mkdir(parents=True)
    (app / "episodes").symlink_to(outside / "episodes", target_is_directory=True)
    (root / "evil_app").symlink_to(tmp_path / "app_out", target_is_directory=True)
    found: list[str] = []
    store = runtime(root).store
    assert list(store.iter_files(outside=found)) == []
    assert found == ["evil_app"]


def test_reading_or_writing_through_a_link_out_of_the_root_is_refused(
    root: Path, outside: Path
) -> None:
    link = linked_file(root, outside)
    store = runtime(root).store
    log = store.read(link)
    assert not log.ok and log.entries == []
    assert "symlink leading outside the memory root" in log.diagnostics[0].message
    with pytest.raises(MarkdownError, match="symlink leading outside the memory root"):
        store.append(ANN, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00",
                                          "parent_type": "memcell"},
                     {"Subject": "s", "Content": "c"}, day=date(2026, 10, 12))
    assert (outside / "episodes" / "episode-2026-10-12.md").read_text() == SECRET_LOG


def test_indexing_records_the_link_as_a_problem_and_search_never_finds_its_text(
    root: Path, outside: Path
) -> None:
    link = linked_file(root, outside)
    rt = runtime(root)
    report = Indexer(rt).reindex()
    assert report.entries_upserted == 1
    (problem,) = report.problems[rt.store.rel(link)]
    assert "symlink leading outside the memory root" in problem
    result = run("search", "SECRET-TOKEN-4711", "--root", str(root), "--json",
                 "--mode", "keyword")
    assert result.exit_code == 0, result.output
    assert "SECRET" not in result.stdout


def test_status_shows_the_link_as_a_readable_problem(root: Path, outside: Path) -> None:
    linked_file(root, outside)
    Indexer(runtime(root)).reindex()
    result = run("status", "--root", str(root))
    assert result.exit_code == 0, result.output
    assert "not read: it is a symlink leading outside the memory root" in result.stdout
    assert "{" not in result.stdout.split("with problems")[1].split("config")[0]


def test_writing_through_a_link_inside_the_root_writes_its_target_and_keeps_the_link(
    root: Path
) -> None:
    # The atomic rename replaced the link itself with a regular file: the shared target no
    # longer got new entries and the person's link was silently gone.
    store = runtime(root).store
    store.append(ANN, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00",
                                      "parent_type": "memcell"},
                 {"Subject": "Cats", "Content": "Ann has a cat."}, day=date(2026, 10, 12))
    log = root / USERS / "u_ann/episodes/episode-2026-10-12.md"
    shared = root / "shared" / "ann-2026-10-12.md"
    shared.parent.mkdir()
    log.rename(shared)
    log.symlink_to(Path("../../../../../shared/ann-2026-10-12.md"))

    store.append(ANN, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00",
                                      "parent_type": "memcell"},
                 {"Subject": "Dogs", "Content": "Ann has a dog."}, day=date(2026, 10, 12))

    assert log.is_symlink()
    assert "Ann has a cat." in shared.read_text() and "Ann has a dog." in shared.read_text()


def test_a_write_spanning_several_logs_writes_through_a_link_inside_the_root(
    root: Path
) -> None:
    # The several-file path (archiving a Reflection's sources from two days at once) renamed
    # over the link itself, as the one-file path did before it wrote through links.
    store = runtime(root).store
    made = [store.append(ANN, Kind.EPISODE, {"timestamp": f"2026-10-{d}T09:00:00+00:00",
                                             "parent_type": "memcell"},
                         {"Subject": "Cats", "Content": f"Ann has a cat ({d})."},
                         day=date(2026, 10, d)) for d in (12, 13)]
    log = root / USERS / "u_ann/episodes/episode-2026-10-12.md"
    shared = root / "shared" / "ann-2026-10-12.md"
    shared.parent.mkdir()
    log.rename(shared)
    log.symlink_to(Path("../../../../../shared/ann-2026-10-12.md"))

    assert store.deprecate(ANN, {e.id: "ep_20261014_0001" for e in made}) == {}

    assert log.is_symlink()
    assert f"{made[0].id}: ep_20261014_0001" in shared.read_text()
    other = root / USERS / "u_ann/episodes/episode-2026-10-13.md"
    assert f"{made[1].id}: ep_20261014_0001" in other.read_text()
    assert not list(root.rglob(".*.tmp"))


def ann_cat(root: Path) -> Path:
    """Ann's log of 2026-10-12 with one entry; its path."""
    runtime(root).store.append(ANN, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00",
                                                   "parent_type": "memcell"},
                               {"Subject": "Cats", "Content": "Ann has a cat."},
                               day=date(2026, 10, 12))
    return root / USERS / "u_ann/episodes/episode-2026-10-12.md"


def test_a_user_folder_linked_to_another_users_is_refused_not_read_as_theirs(
    root: Path
) -> None:
    # users/u_eve -> users/u_ann: every one of Ann's entries answered Eve's searches as Eve's,
    # and an add for Eve (or her merges) wrote into Ann's logs.
    log = ann_cat(root)
    (root / USERS / "u_eve").symlink_to("u_ann", target_is_directory=True)
    before = {p.name: p.read_bytes() for p in log.parent.iterdir()}
    rt = runtime(root)
    report = Indexer(rt).reindex()
    assert report.entries_upserted == 1  # Ann's entry, once
    (problem,) = report.problems[f"{USERS}/u_eve/episodes/episode-2026-10-12.md"]
    assert f"symlink to {USERS}/u_ann/episodes/episode-2026-10-12.md" in problem
    assert rt.store.entries(UserRef.of("u_eve"), Kind.EPISODE) == []
    assert [e.id for e in rt.store.entries(ANN, Kind.EPISODE)] == ["ep_20261012_0001"]

    result = run("search", "cat", "--root", str(root), "--user", "u_eve", "--json")
    assert result.exit_code == 0, result.output
    assert "Ann has a cat" not in result.stdout

    lint = run("lint", "--root", str(root), "--json")
    assert lint.exit_code == 1
    (found,) = json.loads(lint.stdout)["problems"]
    assert found["file"] == f"{USERS}/u_eve/episodes/episode-2026-10-12.md"
    assert "another daily log of this root" in found["message"]

    for day in ("2026-10-12", "2026-10-14"):  # a log that exists, and a new one
        added = run("add", "--root", str(root), "--user", "u_eve", "--subject", "Tea",
                    "--content", "Eve drinks tea.", "--timestamp", f"{day}T10:00:00+00:00")
        assert added.exit_code == 1
        assert "not writing this file: its path leads through a symlink to " \
            f"{USERS}/u_ann/episodes/episode-{day}.md" in added.output
    assert {p.name: p.read_bytes() for p in log.parent.iterdir()} == before


def test_a_log_linked_to_another_day_of_the_same_user_is_refused(root: Path) -> None:
    log = ann_cat(root)
    alias = log.with_name("episode-2026-10-13.md")
    alias.symlink_to(log.name)
    store = runtime(root).store
    read = store.read(alias)
    assert not read.ok and read.entries == []
    assert "episode-2026-10-12.md, another daily log" in read.diagnostics[0].message
    assert [e.id for e in store.read(log).entries] == ["ep_20261012_0001"]
    with pytest.raises(MarkdownError, match="another daily log of this root"):
        store.append(ANN, Kind.EPISODE, {"timestamp": "2026-10-13T10:00:00+00:00",
                                          "parent_type": "memcell"},
                     {"Subject": "s", "Content": "c"}, day=date(2026, 10, 13))
    assert "Ann has a cat." in log.read_text() and "ep_20261013" not in log.read_text()


def test_lint_reports_user_folders_whose_names_are_not_valid_ids(root: Path) -> None:
    """The store skips a folder whose app, project or user name is not a valid id (its logs
    are never read or indexed); lint said nothing, so a user saved as ``bob smith`` vanished
    without a word. Each such folder is now a problem naming the folder and the rule."""
    rt = runtime(root)
    rt.store.append(ANN, Kind.EPISODE, {"timestamp": "2026-10-11T09:00:00+00:00",
                                          "parent_type": "memcell"},
                    {"Subject": "Cats", "Content": "Ann has a cat."}, day=date(2026, 10, 11))
    good = root / USERS / "u_ann/episodes/episode-2026-10-11.md"
    for folder in (f"{USERS}/bob smith", "my app/bot/users/u_ann", f"{USERS}/-dash"):
        (root / folder / "episodes").mkdir(parents=True)
        (root / folder / "episodes" / good.name).write_bytes(good.read_bytes())
    (root / "notes" / "drafts").mkdir(parents=True)  # not a data folder: not reported

    result = run("lint", "--root", str(root), "--json")

    assert result.exit_code == 1
    problems = json.loads(result.stdout)["problems"]
    assert [p["file"] for p in problems] == [
        f"{USERS}/-dash", f"{USERS}/bob smith", "my app"]
    assert "invalid user_id 'bob smith'" in problems[1]["message"]
    assert "invalid app_id 'my app'" in problems[2]["message"]
    assert all(p["message"].endswith("this folder's logs are not read") for p in problems)


def test_status_with_an_index_reports_user_folders_whose_names_are_not_valid_ids(
        root: Path) -> None:
    """``status`` reads its counts from the index when there is one; it added the symlinks
    the store refused but not the folders it skipped for their names, so ``users/bob smith``
    went unreported as soon as the root had been indexed."""
    rt = runtime(root)
    rt.store.append(ANN, Kind.EPISODE, {"timestamp": "2026-10-11T09:00:00+00:00",
                                          "parent_type": "memcell"},
                    {"Subject": "Cats", "Content": "Ann has a cat."}, day=date(2026, 10, 11))
    (root / USERS / "bob smith" / "episodes").mkdir(parents=True)
    Indexer(rt).reindex()

    result = run("status", "--root", str(root), "--json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["counts_from"] == "index"
    (bad,) = document["files_with_problems"]
    assert bad["file"] == f"{USERS}/bob smith"
    (problem,) = bad["problems"]
    assert problem.startswith("invalid user_id 'bob smith'")
    assert problem.endswith("; this folder's logs are not read")


# a loop where a log goes blocks that day's writes: lint names it (test_broken_log_links.py)
@pytest.mark.parametrize("loop", ["loopy", "default_app/loopy", f"{USERS}/loopy",
                                  f"{USERS}/u_ann/.insights"])
def test_a_symlink_loop_is_skipped_as_a_dangling_link_is(root: Path, loop: str) -> None:
    # `ln -s x x` anywhere a user, app or log may be: "OSError: Too many levels of symbolic
    # links" stopped status, lint, search, reindex and every strategy run.
    rt = runtime(root)
    rt.store.append(ANN, Kind.EPISODE, {"timestamp": "2026-10-11T09:00:00+00:00",
                                          "parent_type": "memcell"},
                    {"Subject": "Cats", "Content": "Ann has a cat."}, day=date(2026, 10, 11))
    (root / loop).symlink_to((root / loop).name)
    assert list(rt.store.iter_users()) == [ANN]
    assert [p.name for p in rt.store.iter_files(ANN)] == ["episode-2026-10-11.md"]
    assert Indexer(rt).reindex().entries_upserted == 1
    status = run("status", "--root", str(root))
    assert status.exit_code == 0, status.output
    # where a project's, a user's or a kind's folder goes, every write there fails on it:
    # lint names it (test_broken_folder_links.py); at the top it is nobody's folder
    lint = run("lint", "--root", str(root))
    assert lint.exit_code == (0 if loop == "loopy" else 1), lint.output
    assert (f"{loop}: a symlink loop where" in lint.output) is (loop != "loopy")
