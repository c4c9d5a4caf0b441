"""`clusters`: readable at 80 columns, and `--json` lists each cluster's members."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli import cluster_cmds
from everos_reflect.cli.common import existing_root
from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index import rebuild
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Entry
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, run_reflection, seed_pets

LONG = ("Andrew talked about adopting a rescue dog from the Denver shelter and the apartment "
        "rules that stood in the way for months")


@pytest.fixture
def clustered(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[Entry]:
    rt = make_runtime(root, ExtractiveLLM())
    entries = [add_episode(rt, ANDREW, f"2026-08-0{d}T10:00:00+00:00",
                           LONG if d == 2 else f"Dog plans {d}", f"{LONG}, note {d}.")
               for d in (2, 3, 5)]
    Indexer(rt).scan()
    rt.close()

    def fake_open(root_arg: str | None) -> Runtime:
        return make_runtime(existing_root(root_arg), ExtractiveLLM(), embedder=HashEmbedder(64))

    monkeypatch.setattr(cluster_cmds, "open_runtime", fake_open)
    return entries


def run(*args: str) -> Result:
    return CliRunner(env={"COLUMNS": "80"}).invoke(cli, list(args))


def test_clusters_and_recluster_take_in_episodes_added_since_the_last_sync(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a daemon nothing indexes an `add`: `clusters` said "no clusters" after three
    similar Episodes were added, and `recluster` left them out."""
    rt = make_runtime(root, ExtractiveLLM())
    added = [add_episode(rt, ANDREW, f"2026-08-0{d}T10:00:00+00:00", f"Dog plans {d}",
                         f"{LONG}, note {d}.") for d in (2, 3)]
    rt.close()
    monkeypatch.setattr(cluster_cmds, "open_runtime", lambda root_arg: make_runtime(
        existing_root(root_arg), ExtractiveLLM(), embedder=HashEmbedder(64)))

    shown = run("clusters", "--root", str(root), "--json")

    assert shown.exit_code == 0, shown.output
    (cluster,) = json.loads(shown.stdout)["clusters"]
    assert [m["id"] for m in cluster["members"]] == [e.id for e in added]
    rt = make_runtime(root, ExtractiveLLM())
    later = add_episode(rt, ANDREW, "2026-08-04T10:00:00+00:00", "Dog plans 4", f"{LONG}, 4.")
    rt.close()
    rebuilt = run("recluster", "--root", str(root), "--json")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert json.loads(rebuilt.stdout)["members"] == 3
    (cluster,) = json.loads(run("clusters", "--root", str(root), "--json").stdout)["clusters"]
    assert [m["id"] for m in cluster["members"]] == [*(e.id for e in added), later.id]


def test_clusters_are_listed_as_last_synced_when_the_sync_cannot_run(
        root: Path, clustered: list[Entry], monkeypatch: pytest.MonkeyPatch) -> None:
    """An embedding server down made `clusters` exit 1 once a log had changed (its sync
    embeds): it lists what it has and says why it is not up to date; `recluster` fails."""
    from everos_reflect.errors import ProviderUnavailable

    rt = make_runtime(root, ExtractiveLLM())
    add_episode(rt, ANDREW, "2026-08-06T10:00:00+00:00", "Dog plans 6", f"{LONG}, note 6.")
    rt.close()

    def down(runtime: Runtime, *, patient: bool = False) -> None:
        raise ProviderUnavailable("embedding request to http://127.0.0.1:9/v1 failed")

    monkeypatch.setattr(cluster_cmds, "sync_for_read", down)
    shown = run("clusters", "--root", str(root), "--json")
    assert shown.exit_code == 0, shown.output
    (cluster,) = json.loads(shown.stdout)["clusters"]
    assert [m["id"] for m in cluster["members"]] == [e.id for e in clustered]
    assert "could not bring the index up to date (embedding request" in shown.stderr
    rebuilt = run("recluster", "--root", str(root))
    assert rebuilt.exit_code == 1 and "embedding request" in rebuilt.output


def test_clusters_json_lists_the_members_in_time_order(root: Path,
                                                       clustered: list[Entry]) -> None:
    result = run("clusters", "--root", str(root), "--json")
    assert result.exit_code == 0, result.output
    (cluster,) = json.loads(result.stdout)["clusters"]
    assert [m["id"] for m in cluster["members"]] == [e.id for e in clustered]
    assert cluster["members"][0]["timestamp"] == "2026-08-02T10:00:00+00:00"
    assert cluster["size"] == len(cluster["members"]) == 3


def test_clusters_table_fits_80_columns_with_ids_and_a_readable_preview(
    root: Path, clustered: list[Entry]
) -> None:
    result = run("clusters", "--root", str(root))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0] == str(ANDREW)
    cluster_id = json.loads(run("clusters", "--root", str(root), "--json").stdout)[
        "clusters"][0]["cluster_id"]
    assert lines[1] == f"  {cluster_id}    3 members  2026-08-02 → 08-05  not merged"
    assert lines[2] == "      " + LONG[:73] + "…"  # the preview is clipped, never squeezed


def test_recluster_says_it_waits_for_a_run_in_flight_then_reclusters(
    root: Path, clustered: list[Entry]
) -> None:
    run_in_flight = rebuild.try_shared(root / ".index")  # what a strategy run holds
    assert run_in_flight is not None
    results: list[Result] = []
    command = threading.Thread(target=lambda: results.append(
        CliRunner().invoke(cli, ["recluster", "--root", str(root)])))
    command.start()
    time.sleep(0.5)
    assert command.is_alive()  # not reclustering under the run
    rebuild.release(run_in_flight)
    command.join(10)
    (result,) = results
    assert result.exit_code == 0, result.output
    assert "Waiting for the strategy runs in flight to finish" in result.stderr
    assert result.stdout.startswith("reclustered 1 user: 1 cluster, 3 members")


def test_a_cluster_day_before_year_1000_keeps_four_digits() -> None:
    """`clusters` showed an Episode of 0005-04-14 as "5-04-14" (glibc's strftime("%Y"))."""
    from datetime import UTC, datetime

    assert cluster_cmds._day(datetime(5, 4, 14, 12, tzinfo=UTC).timestamp()) == "0005-04-14"
    assert cluster_cmds._day(datetime(2026, 10, 12, tzinfo=UTC).timestamp()) == "2026-10-12"


def _merged_then_one_more(root: Path) -> tuple[Runtime, Entry]:
    """A root whose cluster was merged, then given a new member (indexed): "+1 new"."""
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    assert run_reflection(rt)["merged"] == 1
    new = add_episode(rt, ANDREW, "2026-09-08T09:00:00-07:00", "Andrew's dogs Toby and Buddy",
                      "Andrew took his two dogs Toby and Buddy to the vet; Andrew has two dogs.")
    Indexer(rt).scan()
    return rt, new


def test_a_merged_cluster_whose_new_member_cannot_be_read_counts_no_new_member(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The index kept the new member ("+1 new": ready to merge again) while a reindex had none
    # of it, and Reflection merged nothing new: `clusters` called the cluster ready. The log
    # not read, the member is out of the index, as a reindex leaves it; `lint` names the log.
    rt, new = _merged_then_one_more(root)
    log = rt.store.path_for_id(ANDREW, new.id)
    log.write_bytes(log.read_bytes() + b"\xff\xfe\n")  # no longer UTF-8: the log is refused
    monkeypatch.setattr(cluster_cmds, "open_runtime", lambda r: rt)

    [listed] = json.loads(run("clusters", "--root", str(root), "--json").stdout)["clusters"]
    assert listed["new_since_consolidation"] == 0 and listed["held_back"] is False
    assert "new" not in run("clusters", "--root", str(root)).stdout.splitlines()[1]
    lint = run("lint", "--root", str(root))
    assert lint.exit_code == 1 and "not valid UTF-8" in lint.stdout
    assert run_reflection(rt).get("merged", 0) == 0  # what the run does, it says

    log.write_bytes(log.read_bytes()[:-3])  # readable again: ready to merge, as it is
    [listed] = json.loads(run("clusters", "--root", str(root), "--json").stdout)["clusters"]
    assert listed["new_since_consolidation"] == 1
    assert listed["held_back"] is False and listed["held_back_reason"] is None


def test_recluster_app_and_project_narrow_the_users(root: Path, clustered: list[Entry]) -> None:
    # Without --user they were ignored: `recluster --app acme` rebuilt every app's clusters.
    from everos_reflect.model import UserRef

    rt = make_runtime(root, ExtractiveLLM(), embedder=HashEmbedder(64))
    add_episode(rt, UserRef.of("bo", "acme"), "2026-08-02T10:00:00+00:00", "Cats", "Bo has cats.")
    Indexer(rt).scan()
    rt.close()
    assert run("recluster", "--root", str(root)).stdout.startswith("reclustered 2 users")
    for args, users in ((["--app", "acme"], "1 user:"), (["--project", "default_project"],
                                                         "2 users:")):
        result = run("recluster", "--root", str(root), *args)
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith(f"reclustered {users}"), (args, result.stdout)
        assert not result.stderr, result.stderr
    # an app or project no user is in is said on stderr (it said "reclustered 0 users" and
    # nothing else); exit 0, as `clusters`, `lessons` and the API answer a filter matching none
    for args, note in (
            (["--app", "nosuch"], "no users in app nosuch of this root (its apps: acme, "
                                  "default_app)"),
            (["--app", "acm"], "no users in app acm of this root (did you mean 'acme'?)"),
            (["--app", "acme", "--project", "x"], "no users in acme/x of this root (its "
                                                  "projects in acme: default_project)")):
        for command in (["recluster"], ["clusters"], ["insights"], ["worldview"],
                        ["lessons", "--task-type", "deploy"]):
            result = run(*command, "--root", str(root), *args)
            assert result.exit_code == 0, result.output
            assert result.stderr == f"note: {note}\n", (command, args, result.stderr)
    bad = run("recluster", "--root", str(root), "--app", "../x")
    assert bad.exit_code == 1 and bad.stderr.startswith("error: invalid app_id '../x'")


def test_a_merged_cluster_whose_new_member_was_deleted_is_not_held_back(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The run's scan drops a member whose entry is gone: nothing new is left and nothing
    # waits. `clusters` said "held back: new member unreadable … not found" until a reindex.
    rt, new = _merged_then_one_more(root)
    rt.store.path_for_id(ANDREW, new.id).unlink()
    monkeypatch.setattr(cluster_cmds, "open_runtime", lambda r: rt)

    [listed] = json.loads(run("clusters", "--root", str(root), "--json").stdout)["clusters"]
    assert listed["held_back"] is False and listed["held_back_reason"] is None
    assert "held back" not in run("clusters", "--root", str(root)).stdout
