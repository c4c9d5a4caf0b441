"""Size limits ([limits] in everos.toml) and strict request types: refused, never processed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.errors import ConfigError, TooLarge
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown.parser import parse_log
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import LimitsSettings, Settings, load_settings, parse_settings
from tests.api_client import ApiClient
from tests.reflect_fixtures import merge_on

ANN = UserRef.of("u_ann")
DAY = date(2026, 10, 12)
SMALL = LimitsSettings(max_request_bytes=8192, max_entry_bytes=2048, max_file_bytes=6000)
META = {"timestamp": "2026-10-12T09:00:00+00:00", "parent_type": "memcell"}


def small_runtime(root: Path) -> Runtime:
    return Runtime(root, replace(Settings(), limits=SMALL), embedder=HashEmbedder())


# --- settings ---------------------------------------------------------------------------------


def test_limits_have_documented_defaults() -> None:
    limits = load_settings("/nonexistent", env={}).limits
    assert (limits.max_request_bytes, limits.max_entry_bytes, limits.max_file_bytes) == (
        1 << 20, 256 << 10, 16 << 20)


def test_a_limit_below_one_kib_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"limits.max_entry_bytes: must be 1,024 to "):
        parse_settings("", "[limits]\nmax_entry_bytes = 10\n", {}, "everos.toml")


# --- the store and the parser -----------------------------------------------------------------


def huge_limit_runtime(root: Path, limit: int) -> Runtime:
    return Runtime(root, replace(Settings(), limits=LimitsSettings(max_file_bytes=limit)),
                   embedder=HashEmbedder())


@pytest.mark.parametrize("limit", [2**63 - 1, 2**62, 1 << 40])
def test_a_huge_file_limit_reads_and_writes_logs_as_usual(root: Path, limit: int) -> None:
    # Every log was read with read(max_file_bytes + 1), which allocates that many bytes up
    # front: 2**63 - 1 raised OverflowError and 2**62 or 1 TiB MemoryError, out of every
    # command that opened a log (add, search, reindex, serve), as a traceback. (everos.toml
    # now refuses a limit past 1 GiB; the store still takes any it is given.)
    rt = huge_limit_runtime(root, limit)
    first = rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "one"},
                            day=DAY)
    second = rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "two"},
                             day=DAY)
    assert [e.id for e in rt.store.entries(ANN, Kind.EPISODE)] == [first.id, second.id]


@pytest.mark.parametrize("limit", [2**63 - 1, 2**62])
def test_a_huge_file_limit_indexes_logs_as_usual(root: Path, limit: int) -> None:
    # The store read logs in pieces, but the indexer still read each with one
    # read(max_file_bytes + 1), which allocates that many bytes up front: every command that
    # syncs the index (search, reindex, serve) died with an OverflowError or MemoryError
    # traceback, and so did the id watermark of a log the index had not read again.
    from everos_reflect.index.reads import _mentioned_seq

    rt = huge_limit_runtime(root, limit)
    entry = rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "one"},
                            day=DAY)
    assert Indexer(rt).reindex().entries_upserted == 1
    path = rt.store.log_path(ANN, Kind.EPISODE, DAY)
    assert _mentioned_seq(root, path, "ep_20261012_", limit) == int(entry.id[-4:])


def test_appending_an_entry_over_the_limit_is_refused_and_writes_nothing(root: Path) -> None:
    rt = small_runtime(root)
    with pytest.raises(TooLarge, match=r"the entry is [\d,]+ bytes, over limits.max_entry_bytes"):
        rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "x" * 3000},
                        day=DAY)
    assert not rt.store.log_path(ANN, Kind.EPISODE, DAY).exists()


def test_an_append_that_would_push_the_log_over_the_file_limit_is_refused(root: Path) -> None:
    rt = small_runtime(root)
    for _ in range(3):
        rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "x" * 1500},
                        day=DAY)
    path = rt.store.log_path(ANN, Kind.EPISODE, DAY)
    before = path.read_bytes()
    with pytest.raises(TooLarge, match=r"over limits\.max_file_bytes"):
        rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "x" * 1500},
                        day=DAY)
    assert path.read_bytes() == before


def test_a_hand_written_entry_over_the_limit_is_an_error_and_skipped() -> None:
    head = "---\ntype: episode_daily\nschema_version: 1\nuser_id: u\ndate: '2026-10-12'\n---\n"

    def block(n: int, content: str) -> str:
        eid = f"ep_20261012_{n:04d}"
        return (f"<!-- entry:{eid} -->\n---\nowner_id: u\ntimestamp: 2026-10-12T09:00:00Z\n"
                f"---\n## Content\n{content}\n<!-- /entry:{eid} -->\n")

    log = parse_log(head + block(1, "é" * 1100) + block(2, "ok"), "episode-2026-10-12.md",
                    max_entry_bytes=2048)
    assert [e.id for e in log.entries] == ["ep_20261012_0002"]
    (problem,) = [d for d in log.diagnostics if d.severity != "warning"]
    assert problem.line == 7 and problem.severity == "error"
    assert "over limits.max_entry_bytes (2,048); not read" in problem.message


@pytest.fixture
def oversized(root: Path) -> tuple[Runtime, Path, Path]:
    """One log over the file limit (grown by hand) and one ordinary log of another day."""
    rt = small_runtime(root)
    good = rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "Cats", "Content": "Miso."},
                           day=DAY)
    big_day = date(2026, 10, 13)
    rt.store.append(ANN, Kind.EPISODE, META | {"timestamp": "2026-10-13T09:00:00Z"},
                    {"Subject": "s", "Content": "first"}, day=big_day)
    big = rt.store.log_path(ANN, Kind.EPISODE, big_day)
    with big.open("a") as fh:
        fh.write("filler line\n" * 1000)
    return rt, rt.store.path_for_id(ANN, good.id), big


def test_a_log_over_the_file_limit_is_fatal_and_not_read(
    oversized: tuple[Runtime, Path, Path],
) -> None:
    rt, _, big = oversized
    log = rt.store.read(big)
    assert not log.ok and log.entries == []
    assert "over limits.max_file_bytes (6,000); not read" in log.diagnostics[0].message


def test_indexing_skips_a_log_over_the_limit_and_indexes_its_neighbours(
    oversized: tuple[Runtime, Path, Path],
) -> None:
    rt, good, big = oversized
    report = Indexer(rt).reindex()
    assert report.entries_upserted == 1
    (problem,) = report.problems[rt.store.rel(big)]
    assert "over limits.max_file_bytes" in problem
    assert rt.db().execute("SELECT path FROM entries").fetchone()["path"] == rt.store.rel(good)


def test_writers_refuse_a_log_over_the_limit(oversized: tuple[Runtime, Path, Path]) -> None:
    rt, _, big = oversized
    before = big.read_bytes()
    with pytest.raises(Exception, match=r"not writing this file: the log is"):
        rt.store.append(ANN, Kind.EPISODE, META | {"timestamp": "2026-10-13T10:00:00Z"},
                        {"Subject": "s", "Content": "c"}, day=date(2026, 10, 13))
    assert big.read_bytes() == before


def test_lint_reports_a_log_over_the_limit(root: Path) -> None:
    (root / "everos.toml").write_text("[limits]\nmax_file_bytes = 2000\n")
    path = root / "default_app/default_project/users/u_ann/episodes/episode-2026-10-12.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\ntype: episode_daily\nschema_version: 1\nuser_id: u_ann\n"
                    "date: '2026-10-12'\n---\n" + "x\n" * 2000)
    result = CliRunner().invoke(cli, ["lint", "--root", str(root), "--json"])
    assert result.exit_code == 1
    (problem,) = json.loads(result.stdout)["problems"]
    assert "over limits.max_file_bytes (2,000)" in problem["message"]


# --- the HTTP API -----------------------------------------------------------------------------


Client = ApiClient


@pytest.fixture
def call(root: Path) -> Iterator[Client]:
    rt = small_runtime(root)
    yield Client(rt)
    rt.close()


def written(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.md"))


def test_a_body_over_the_request_limit_answers_413_naming_the_limit(
    call: Client, root: Path
) -> None:
    body = {"user_id": "u_ann", "subject": "s", "content": "x" * 10_000}
    resp = call("POST", "/api/v1/memory/episodes", json=body)
    assert resp.status_code == 413
    sent = int(resp.request.headers["content-length"])  # the body's size: named since s49
    assert resp.json()["error"] == {
        "code": "too_large",
        "message": f"the request body is {sent:,} bytes, over limits.max_request_bytes (8,192)"}
    assert written(root) == []


def test_a_streamed_body_without_length_is_cut_off_at_the_limit_too(
    call: Client, root: Path
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"user_id": "u_ann", "subject": "s", "content": "'
        for _ in range(100):
            yield b"x" * 1000
        yield b'"}'

    resp = call("POST", "/api/v1/memory/episodes", content=chunks(),
                headers={"content-type": "application/json"})
    assert resp.status_code == 413 and resp.json()["error"]["code"] == "too_large"
    assert written(root) == []


def test_an_entry_over_the_entry_limit_answers_422_naming_the_limit(
    call: Client, root: Path
) -> None:
    body = {"user_id": "u_ann", "subject": "s", "content": "x" * 3000}
    resp = call("POST", "/api/v1/memory/episodes", json=body)
    assert resp.status_code == 422
    error = resp.json()["error"]
    assert error["code"] == "too_large"
    assert "over limits.max_entry_bytes (2,048)" in error["message"]
    assert written(root) == []


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/ome/trigger", {"name": "reflect_episodes", "force": "yes"}, "force"),
        ("/api/v1/ome/trigger", {"name": "reflect_episodes", "force": 1}, "force"),
        ("/api/v1/memory/search", {"query": "q", "include_deprecated": "true"},
         "include_deprecated"),
        ("/api/v1/memory/search", {"query": "q", "top_k": "5"}, "top_k"),
        ("/api/v1/ome/undo", {"entry_id": "ep_20261012_0001", "user_id": "u", "cascade": "no"},
         "cascade"),
    ],
)
def test_request_types_are_strict(call: Client, path: str, body: dict[str, Any],
                                  field: str) -> None:
    resp = call("POST", path, json=body)
    assert resp.status_code == 422
    error = resp.json()["error"]
    assert error["code"] == "invalid_request" and error["message"].startswith(f"{field}: ")


def test_append_many_keeps_the_same_limits_and_writes_none_of_the_batch(root: Path) -> None:
    rt = small_runtime(root)
    path = rt.store.log_path(ANN, Kind.ATOMIC_FACT, DAY)
    fact = {"timestamp": META["timestamp"], "parent_type": "episode", "parent_id": "ep_x"}
    with pytest.raises(TooLarge, match=r"over limits\.max_entry_bytes"):
        rt.store.append_many(ANN, Kind.ATOMIC_FACT, [(fact, {"Fact": "short"}),
                                                     (fact, {"Fact": "x" * 3000})], day=DAY)
    assert not path.exists()  # all or none: the short one is not written either
    with pytest.raises(TooLarge, match=r"over limits\.max_file_bytes"):
        rt.store.append_many(ANN, Kind.ATOMIC_FACT,
                             [(fact, {"Fact": "x" * 1500}) for _ in range(5)], day=DAY)
    assert not path.exists()


def test_a_narrative_too_large_to_write_is_rejected_not_left_interrupted(root: Path) -> None:
    # Each Episode fits max_entry_bytes, their merge did not: the commit stopped half-way, the
    # journal row stayed, every later run failed to "recover" it and `lint` reported an
    # interrupted merge for good. Now the draft is rejected before anything is written.
    from everos_reflect.embedding import HashEmbedder
    from everos_reflect.llm import ExtractiveLLM
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import LimitsSettings
    from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, reports, run_reflection

    base = make_runtime(root, ExtractiveLLM())
    rt = Runtime(root, replace(base.settings, limits=LimitsSettings(max_entry_bytes=1024)),
                 embedder=HashEmbedder(64), llm=ExtractiveLLM())
    base.close()
    dogs = ("Toby", "Buddy", "Rex")
    for n, dog in enumerate(dogs):
        others = " ".join(f"Andrew walks {d} in the park and feeds {d} every day in October."
                          for d in dogs if d != dog)
        add_episode(rt, ANDREW, f"2026-10-1{n}T10:00:00+00:00", f"Dog {dog}",
                    f"Andrew adopted a dog named {dog} from the Denver shelter this week. "
                    f"{dog} sleeps in a basket by the window and barks at the mail carrier. "
                    f"{others} Andrew bought {dog} a red collar with a silver name tag.")
    before = {p: p.read_bytes() for p in rt.store.iter_files()}

    counts = run_reflection(rt)

    assert counts.get("rejected") == 1 and not counts.get("interrupted"), counts
    [report] = reports(rt)
    assert report["status"] == "rejected" and "limits.max_entry_bytes (1,024)" in report["error"]
    assert {p: p.read_bytes() for p in rt.store.iter_files()} == before
    assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    rt.close()


#: The day the merges below write their narrative to (``merge_on``): the tests fill that
#: log first, and the day read off the clock could turn before the merge.
MERGE_DAY = date(2026, 10, 12)


def _filled_root(root: Path, kind: Kind, day: date, filler: int) -> tuple[Runtime, Path]:
    """The pets seed under max_file_bytes=4096, with one unrelated old entry of ``filler``
    bytes in ``kind``'s log of ``day``: that log is left just under the limit."""
    from everos_reflect.llm import ExtractiveLLM
    from tests.reflect_fixtures import ANDREW, make_runtime, seed_pets

    base = make_runtime(root, ExtractiveLLM())
    rt = Runtime(root, replace(base.settings, limits=LimitsSettings(max_file_bytes=4096)),
                 embedder=HashEmbedder(64), llm=ExtractiveLLM())
    base.close()
    seed_pets(rt)
    stamp = "2020-01-01T00:00:00+00:00"
    if kind is Kind.EPISODE:
        meta, sections = {"timestamp": stamp, "parent_type": "memcell"}, {
            "Subject": "Zzz", "Content": "q" * filler}
    else:
        meta, sections = {"timestamp": stamp, "parent_type": "episode",
                          "parent_id": "ep_20200101_0001"}, {"Fact": "q" * filler}
    filled = rt.store.append(ANDREW, kind, meta, sections, day=day)
    return rt, rt.store.path_for_id(ANDREW, filled.id)


@pytest.mark.parametrize("kind", [Kind.EPISODE, Kind.ATOMIC_FACT])
def test_a_merge_that_would_outgrow_the_file_limit_is_rejected_not_left_interrupted(
        root: Path, kind: Kind, monkeypatch: pytest.MonkeyPatch) -> None:
    # The narrative goes to today's episode log, its facts to today's fact log: with either
    # log near max_file_bytes the commit stopped at that write, and every later run failed to
    # recover it ("interrupted" for good). Now the draft is rejected before anything is written.
    from tests.reflect_fixtures import reports, run_reflection

    merge_on(monkeypatch, MERGE_DAY)
    rt, full = _filled_root(root, kind, MERGE_DAY, 3300)
    before = {p: p.read_bytes() for p in rt.store.iter_files()}

    counts = run_reflection(rt)

    assert counts.get("rejected") == 1 and not counts.get("interrupted"), counts
    [report] = reports(rt)
    assert report["status"] == "rejected", report
    assert f"{rt.store.rel(full)} would grow to" in report["error"]
    assert "over limits.max_file_bytes (4,096)" in report["error"]
    assert {p: p.read_bytes() for p in rt.store.iter_files()} == before
    assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    rt.close()


def test_archiving_that_would_push_a_source_log_over_the_limit_is_rejected(root: Path) -> None:
    # The first source's log held another, unrelated Episode: the deprecated_entries keys
    # the merge added pushed it past max_file_bytes, and from then on that log was "not read"
    # (the unrelated Episode vanished from the index and every read).
    from tests.reflect_fixtures import reports, run_reflection

    rt, full = _filled_root(root, Kind.EPISODE, date(2026, 8, 2), 3500)
    before = {p: p.read_bytes() for p in rt.store.iter_files()}

    counts = run_reflection(rt)

    assert counts.get("rejected") == 1 and not counts.get("merged"), counts
    [report] = reports(rt)
    assert f"{rt.store.rel(full)} would grow to" in report["error"]
    assert {p: p.read_bytes() for p in rt.store.iter_files()} == before
    assert not rt.store.read(full).diagnostics
    rt.close()


def test_a_journaled_merge_refused_by_the_file_limit_is_withdrawn_by_recovery(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The log filled up after the merge was journaled (another writer appended meanwhile, or
    # the merges of one batch together): recovery retried the refused write every run.
    from everos_reflect.strategies import journal
    from tests.reflect_fixtures import ANDREW, crash_run_at, reports, run_reflection

    merge_on(monkeypatch, MERGE_DAY)
    rt, _ = _filled_root(root, Kind.ATOMIC_FACT, date(2020, 1, 1), 10)
    crash_run_at(monkeypatch, rt, journal.PLANNED)
    rt.store.append(ANDREW, Kind.EPISODE, {"timestamp": "2020-01-01T00:00:00+00:00",
                                           "parent_type": "memcell"},
                    {"Subject": "Zzz", "Content": "q" * 3700}, day=MERGE_DAY)

    counts = run_reflection(rt, run_id="run_2")

    assert counts.get("recovered_rejected") == 1, counts
    assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    statuses = sorted(r["status"] for r in reports(rt))
    assert statuses == ["rejected", "rejected"], statuses  # recovery's, then the new draft's
    assert all("limits.max_file_bytes (4,096)" in r["error"] for r in reports(rt))
    rt.close()


def test_merges_whose_archiving_together_would_outgrow_a_shared_source_log_are_refused(
        root: Path) -> None:
    # Two clusters each have a source in one nearly full log. overfull() measures each merge
    # alone, and each fits; the batch then wrote both merges' deprecated_entries keys into
    # that log in one go, pushing it past max_file_bytes: from then on it was "not read" and
    # its unrelated entry vanished. Now the second merge is refused (rejected, withdrawn).
    from everos_reflect.llm import ExtractiveLLM
    from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, reports, run_reflection

    base = make_runtime(root, ExtractiveLLM(), threshold=0.9)
    rt = Runtime(root, replace(base.settings, limits=LimitsSettings(max_file_bytes=4096)),
                 embedder=HashEmbedder(64), llm=ExtractiveLLM())
    base.close()
    for day in ("2026-08-02T09:00:00-07:00", "2026-08-10T09:00:00-07:00"):
        add_episode(rt, ANDREW, day, "Andrew walks his dog Toby",
                    "Andrew walks his dog Toby in the park every morning.")
    for day in ("2026-08-02T20:00:00-07:00", "2026-08-20T20:00:00-07:00"):
        add_episode(rt, ANDREW, day, "Andrew baked sourdough bread",
                    "Andrew baked sourdough bread with rye flour and a starter called Bubbles.")
    shared = rt.store.log_path(ANDREW, Kind.EPISODE, date(2026, 8, 2))
    rt.store.append(ANDREW, Kind.EPISODE, {"timestamp": "2026-08-02T23:00:00-07:00",
                                           "parent_type": "memcell"},
                    {"Subject": "Zzz", "Content": "q" * 3155}, day=date(2026, 8, 2))
    assert 4096 - 100 < shared.stat().st_size <= 4096 - 60  # room for one merge's keys only

    counts = run_reflection(rt)

    assert counts.get("merged") == 1 and counts.get("rejected") == 1, counts
    assert shared.stat().st_size <= 4096
    assert not [d for d in rt.store.read(shared).diagnostics if d.severity == "fatal"]
    [refused] = [r for r in reports(rt) if r["status"] == "rejected"]
    assert f"{rt.store.rel(shared)} would grow to" in refused["error"]
    assert "withdrawn" in refused["error"]
    assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    rt.close()


@pytest.mark.parametrize("several", [False, True])
def test_archiving_or_updating_never_writes_a_log_past_the_file_limit(
        root: Path, several: bool) -> None:
    # Only appends were checked: deprecated_entries keys (or a metadata update) pushed a log
    # just under max_file_bytes past it, and from then on the log was "not read" -- every
    # entry of it gone from the index.
    rt = small_runtime(root)
    first = rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "x" * 1800},
                            day=DAY)
    second = rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "y" * 1800},
                             day=DAY)
    path = rt.store.log_path(ANN, Kind.EPISODE, DAY)
    size = len(path.read_bytes())
    rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "z"}, day=DAY)
    overhead = len(path.read_bytes()) - size - 1  # an entry's bytes besides its content
    room = 6000 - len(path.read_bytes()) - 20  # leave 20 bytes: less than one archive key
    rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "z" * (room - overhead)},
                    day=DAY)
    before = path.read_bytes()
    assert 5975 <= len(before) <= 5985
    mapping = {first.id: second.id}
    if several:  # the several-file write (a Reflection batch archiving into many logs)
        other = rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "w"},
                                day=date(2026, 10, 13))
        mapping[other.id] = second.id
    with pytest.raises(TooLarge, match=r"after this change is [\d,]+ bytes, over "
                                       r"limits\.max_file_bytes \(6,000\)"):
        rt.store.deprecate(ANN, mapping)
    assert path.read_bytes() == before
    with pytest.raises(TooLarge, match=r"over limits\.max_file_bytes"):
        rt.store.update_meta(ANN, first.id, {"note": "q" * 200})
    assert path.read_bytes() == before
    assert not rt.store.read(path).diagnostics


def test_an_interrupted_merge_whose_archiving_no_longer_fits_a_source_log_is_withdrawn(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Interrupted after its facts were written; then an append left the first source's log
    # too full for the merge's deprecated_entries keys. Recovery (which commits one merge
    # alone) recorded "archiving" and only then met the refused write: the merge counted as
    # committed, could be neither finished nor withdrawn, and recovery failed every run.
    from everos_reflect.strategies import journal
    from tests.reflect_fixtures import (
        ANDREW,
        check_invariants,
        crash_run_at,
        reports,
        run_reflection,
    )

    rt, source_log = _filled_root(root, Kind.EPISODE, date(2026, 8, 2), 10)
    crash_run_at(monkeypatch, rt, journal.FACTS)
    rt.store.append(ANDREW, Kind.EPISODE, {"timestamp": "2026-08-02T23:00:00-07:00",
                                           "parent_type": "memcell"},
                    {"Subject": "Zzz", "Content": "q" * 3320}, day=date(2026, 8, 2))
    assert 4096 - 57 < source_log.stat().st_size <= 4096  # no room for one key line

    counts = run_reflection(rt, run_id="run_2")

    assert counts.get("recovered_rejected") == 1, counts
    assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    [report] = [r for r in reports(rt) if r["run_id"] == "run_test"]
    assert report["status"] == "rejected"
    assert f"{rt.store.rel(source_log)} would grow to" in report["error"]
    assert "withdrawn" in report["error"]
    assert source_log.stat().st_size <= 4096
    assert not rt.store.read(source_log).diagnostics
    entries = check_invariants(rt)
    assert not [e for e in entries.values() if e.parent_type == "cluster" and not e.deprecated_by]
    rt.close()


def test_a_merge_refused_at_its_facts_is_withdrawn_even_when_its_narrative_filled_the_log(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The narrative's append fitted today's episode log with fewer bytes to spare than the
    # key withdrawing it; the facts were then refused (their log full), and the withdrawal's
    # key was refused too: the merge stayed "abandoning" for good, its narrative live beside
    # its sources. The narrative's append now keeps that room (or is refused itself).
    from everos_reflect.markdown import writer
    from everos_reflect.model import parse_timestamp
    from everos_reflect.strategies import journal
    from tests.reflect_fixtures import (
        ANDREW,
        check_invariants,
        crash_run_at,
        reports,
        run_reflection,
    )

    today = MERGE_DAY
    merge_on(monkeypatch, today)
    rt, _ = _filled_root(root, Kind.ATOMIC_FACT, date(2020, 1, 1), 10)
    crash_run_at(monkeypatch, rt, journal.PLANNED)
    [(plan, _)] = journal.pending(rt.db())
    rt.store.append(ANDREW, Kind.ATOMIC_FACT,  # then the facts' log fills up
                    {"timestamp": "2020-01-01T00:00:00+00:00", "parent_type": "episode",
                     "parent_id": "ep_20200101_0001"}, {"Fact": "q" * 3700}, day=today)
    # a filler entry sized so that the narrative (id _0002) then leaves 20 bytes spare
    filler = {"timestamp": "2020-01-01T00:00:00+00:00", "parent_type": "memcell"}
    stamped = {"owner_id": ANDREW.user_id, **filler,
               "timestamp": parse_timestamp(filler["timestamp"])}
    narrative = {**journal.narrative_meta(plan),
                 "timestamp": parse_timestamp(plan.timestamp)}

    def size_with(n: int) -> int:
        text = writer.new_log_text(Kind.EPISODE, ANDREW.user_id, today)
        text = writer.append_entry(text, writer.render_entry(
            f"ep_{today:%Y%m%d}_0001", stamped, {"Subject": "Zzz", "Content": "q" * n}))
        text = writer.append_entry(text, writer.render_entry(
            f"ep_{today:%Y%m%d}_0002", narrative,
            {"Subject": plan.title, "Content": plan.content}))
        return len(text.encode("utf-8"))

    rt.store.append(ANDREW, Kind.EPISODE, filler,
                    {"Subject": "Zzz", "Content": "q" * (4096 - 20 - size_with(0))}, day=today)
    episode_log = rt.store.log_path(ANDREW, Kind.EPISODE, today)
    before = episode_log.read_bytes()

    counts = run_reflection(rt, run_id="run_2")

    assert counts.get("recovered_rejected") == 1, counts
    assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    [report] = [r for r in reports(rt) if r["run_id"] == "run_test"]
    assert report["status"] == "rejected"
    assert "limits.max_file_bytes (4,096)" in report["error"]
    assert episode_log.read_bytes() == before  # refused whole: nothing to withdraw
    entries = check_invariants(rt)
    assert not [e for e in entries.values() if e.parent_type == "cluster" and not e.deprecated_by]
    rt.close()


@pytest.fixture
def small_yaml_bound(monkeypatch: pytest.MonkeyPatch) -> int:
    """The YAML value bound lowered to 2,000 for the tests below. What they test is how a
    merge or an append meets a frontmatter at the bound, not where the bound is (that is
    ``test_the_yaml_value_bound_is_reached_where_these_tests_fill_the_frontmatter``): at the
    real 50,000 each parse of such a log took ~1.5 s, and a merge parses it a dozen times."""
    from everos_reflect.markdown import parser

    monkeypatch.setattr(parser, "MAX_YAML_NODES", 2_000)
    return parser.MAX_YAML_NODES


def test_a_withdrawable_append_to_a_log_whose_frontmatter_is_full_of_keys_is_refused(
        root: Path, small_yaml_bound: int) -> None:
    # Measuring the room for a withdrawal key re-parses the frontmatter with that key added;
    # a log already at the YAML value bound raised MarkdownError there (the merge stayed
    # interrupted), and then the room was only estimated, so the narrative was written where
    # it could never be withdrawn. The append is refused as too large (the merge is rejected
    # with nothing written); one that need not stay withdrawable still writes.
    from everos_reflect.errors import NoRoomToWithdraw

    rt = Runtime(root, Settings(), embedder=HashEmbedder())
    pairs = (small_yaml_bound - 12) // 2  # the file's other values: 12 (+ 2 per pair)
    log = rt.store.log_path(ANN, Kind.EPISODE, DAY)
    log.parent.mkdir(parents=True)
    log.write_text(
        "---\ntype: episode_daily\nschema_version: 1\nuser_id: u_ann\ndate: '2026-10-12'\n"
        "deprecated_entries:\n"
        + "".join(f"  ep_20261011_{i:05d}: ep_20261011_{i + 1:05d}\n" for i in range(pairs))
        + "---\n")
    assert not rt.store.read(log).diagnostics
    before = log.read_bytes()

    with pytest.raises(NoRoomToWithdraw, match="cannot take the keys") as refused:
        rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "c"},
                        day=DAY, withdrawable=True)

    assert isinstance(refused.value, TooLarge)  # what Reflection turns into 'rejected'
    assert log.read_bytes() == before
    entry = rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "c"}, day=DAY)
    assert [e.id for e in rt.store.read(log).entries] == [entry.id]
    rt.close()


def _frontmatter_full_of_keys(rt: Runtime, path: Path) -> None:
    """Fill ``path``'s frontmatter with ``deprecated_entries`` keys (of ids not in the log) up
    to the YAML parser's value bound: the log still reads clean, but takes no further key."""
    from everos_reflect.errors import EverosError
    from everos_reflect.markdown import writer
    from everos_reflect.markdown.parser import MAX_YAML_NODES

    _, head, body = path.read_text("utf-8").split("---\n", 2)
    keys = "".join(f"  ep_20200101_{i:05d}: ep_20200102_{i:05d}\n"
                   for i in range((MAX_YAML_NODES - 12) // 2))
    path.write_text(f"---\n{head}deprecated_entries:\n{keys}---\n{body}", "utf-8")
    assert not rt.store.read(path).diagnostics
    with pytest.raises(EverosError, match=f"more than {MAX_YAML_NODES} values"):
        writer.add_deprecations(path.read_text("utf-8"), {"ep_20200103_0001": "ep_20200103_0002"})


def test_the_yaml_value_bound_is_reached_where_these_tests_fill_the_frontmatter(
        root: Path) -> None:
    # The tests around this one lower the bound (small_yaml_bound); this one fills a real
    # log's frontmatter at the real bound (50,000 values): it still reads clean, and the
    # next deprecated_entries key is refused.
    from everos_reflect.markdown.parser import MAX_YAML_NODES

    assert MAX_YAML_NODES == 50_000
    rt = Runtime(root, Settings(), embedder=HashEmbedder())
    entry = rt.store.append(ANN, Kind.EPISODE, META, {"Subject": "s", "Content": "c"}, day=DAY)
    _frontmatter_full_of_keys(rt, rt.store.path_for_id(ANN, entry.id))
    rt.close()


@pytest.mark.parametrize("interrupted", [False, True])
def test_a_merge_whose_source_log_cannot_take_its_keys_is_rejected_not_left_committed(
        root: Path, monkeypatch: pytest.MonkeyPatch, interrupted: bool,
        small_yaml_bound: int) -> None:
    # A source's log whose frontmatter is at the YAML value bound refuses the merge's
    # deprecated_entries key. The checks before "archiving" measured the keys with size_after,
    # which answers None ("fits") for an edit that raises: the merge recorded "archiving",
    # then met the refused write, and stayed committed for good, its narrative live beside
    # its live sources and recovery failing at every run. It is now rejected and withdrawn,
    # by a run (the batch commit) and by recovery (a merge finished alone).
    from everos_reflect.llm import ExtractiveLLM
    from everos_reflect.strategies import journal
    from tests.reflect_fixtures import (
        ANDREW,
        check_invariants,
        crash_run_at,
        make_runtime,
        reports,
        run_reflection,
        seed_pets,
    )

    rt = make_runtime(root, ExtractiveLLM())
    sources = seed_pets(rt)
    if interrupted:
        crash_run_at(monkeypatch, rt, journal.FACTS)
    _frontmatter_full_of_keys(rt, rt.store.path_for_id(ANDREW, sources[0].id))

    counts = run_reflection(rt, run_id="run_2")

    assert counts.get("recovered_rejected" if interrupted else "rejected") == 1, counts
    assert counts.get("merged") is None, counts
    assert not journal.pending(rt.db())
    assert reports(rt) and all(r["status"] == "rejected" and "cannot take the merge's "
                               "deprecated_entries keys" in r["error"] for r in reports(rt))
    entries = check_invariants(rt)
    assert all(entries[s.id].deprecated_by is None for s in sources)
    assert not [e for e in entries.values() if e.parent_type == "cluster" and not e.deprecated_by]
    rt.close()


def test_a_merge_whose_narrative_log_cannot_take_its_withdrawal_key_is_rejected_unwritten(
        root: Path, monkeypatch: pytest.MonkeyPatch,
        small_yaml_bound: int) -> None:
    # Today's episode log (where the narrative goes) has a frontmatter at the YAML value
    # bound. The narrative was appended all the same; a source then edited (stale) meant
    # withdrawing it, whose key the frontmatter refused: the merge stayed 'abandoning' for
    # good, its narrative live beside its sources, recovery failing at every run.
    from everos_reflect.llm import ExtractiveLLM
    from everos_reflect.markdown import writer
    from everos_reflect.strategies import journal
    from tests.reflect_fixtures import (
        ANDREW,
        check_invariants,
        make_runtime,
        reports,
        run_reflection,
        seed_pets,
    )

    rt = make_runtime(root, ExtractiveLLM())
    sources = seed_pets(rt)
    today = MERGE_DAY
    merge_on(monkeypatch, today)
    log = rt.store.log_path(ANDREW, Kind.EPISODE, today)
    log.write_text(writer.new_log_text(Kind.EPISODE, ANDREW.user_id, today), "utf-8")
    _frontmatter_full_of_keys(rt, log)
    before = log.read_bytes()

    def edit_a_source(reached: str) -> None:
        if reached == journal.NARRATIVE:
            path = rt.store.path_for_id(ANDREW, sources[2].id)
            path.write_text(path.read_text("utf-8").replace("two dogs", "2 dogs"), "utf-8")

    monkeypatch.setattr(journal, "checkpoint", edit_a_source)
    counts = run_reflection(rt)

    assert counts.get("rejected") == 1 and not counts.get("merged"), counts
    assert not journal.pending(rt.db())
    assert [r["status"] for r in reports(rt)] == ["rejected"]
    assert log.read_bytes() == before
    entries = check_invariants(rt)
    assert not [e for e in entries.values() if e.parent_type == "cluster"]
    rt.close()


def test_a_merge_on_a_day_with_ten_digit_ids_is_measured_with_its_real_id_width(
        root: Path) -> None:
    # oversized() measured the narrative with a seven-digit id: on a day whose log holds a
    # hand-written ep_…_1234567890 the real id is three digits longer in both markers, so a
    # narrative a byte over max_entry_bytes passed the check and was refused at its write.
    from everos_reflect.markdown import writer
    from everos_reflect.model import parse_timestamp
    from everos_reflect.strategies.journal import Plan, narrative_meta, oversized

    rt = Runtime(root, replace(Settings(), limits=LimitsSettings(max_entry_bytes=1024)),
                 embedder=HashEmbedder())
    path = rt.store.log_path(ANN, Kind.EPISODE, DAY)
    path.parent.mkdir(parents=True)
    hand = writer.render_entry("ep_20261012_1234567890", {"owner_id": "u_ann", **META},
                               {"Subject": "Typed by hand", "Content": "An old note."})
    path.write_text(writer.append_entry(writer.new_log_text(Kind.EPISODE, "u_ann", DAY), hand))
    plan = Plan(id="rj_0000000000000001", run_id="run", app=ANN.app, project=ANN.project,
                user_id=ANN.user_id, cluster_id="cl_000000000001", mode="init",
                day=DAY.isoformat(), title="Dogs", content="", facts=[],
                timestamp="2026-10-12T09:00:00+00:00",
                sources=["ep_20261001_0001", "ep_20261001_0002"], existing_id=None,
                hashes={}, fact_ids=[], provider="extractive", model="extractive")

    def written_size(content: str) -> int:
        """The bytes of the narrative as the store writes it: its real id, its timestamp."""
        meta = {**narrative_meta(plan), "timestamp": parse_timestamp(plan.timestamp)}
        return len(writer.render_entry("ep_20261012_1234567891", meta,
                                       {"Subject": "Dogs", "Content": content}).encode())

    content = "d" * (1026 - written_size("d"))  # one byte over the limit as written
    assert written_size(content) == 1025
    plan = replace(plan, content=content)

    assert oversized(rt, plan) is not None
    with pytest.raises(TooLarge, match=r"the entry is 1,025 bytes"):
        rt.store.append(ANN, Kind.EPISODE, narrative_meta(plan),
                        {"Subject": "Dogs", "Content": content}, day=DAY, withdrawable=True)
    rt.close()


@pytest.mark.parametrize("value", [1, 1_001, 5_000])
def test_max_sources_per_merge_outside_2_to_1000_is_a_config_error_naming_the_key(
        value: int) -> None:
    # Unbounded, a cluster of ~3,400 sources made a narrative whose `sources` list alone
    # passed the parser's 64 KiB metadata cap: the store refused it and the merge stuck.
    from everos_reflect.engine.registry import validate_strategy_settings

    with pytest.raises(ConfigError) as info:
        validate_strategy_settings("reflect_episodes", {"max_sources_per_merge": value},
                                   "ome.toml")
    assert info.value.problems == [("ome.toml", "strategies.reflect_episodes."
                                    "max_sources_per_merge", f"must be 2 to 1,000, got {value}")]


def test_the_widest_narrative_max_sources_per_merge_allows_is_written_and_read_back(
        root: Path) -> None:
    from everos_reflect.engine.registry import validate_strategy_settings
    from everos_reflect.strategies.journal import Plan, narrative_meta
    from everos_reflect.strategies.reflect import MAX_SOURCES_PER_MERGE

    settings = validate_strategy_settings(
        "reflect_episodes", {"max_sources_per_merge": MAX_SOURCES_PER_MERGE}, "ome.toml")
    count = settings["max_sources_per_merge"]
    # an update: the old narrative and that many new sources, every id ten digits wide
    plan = Plan(id="rj_0000000000000001", run_id="run", app=ANN.app, project=ANN.project,
                user_id=ANN.user_id, cluster_id="cl_000000000001", mode="update",
                day=DAY.isoformat(), title="Dogs", content="Two dogs.", facts=[],
                timestamp="2026-10-12T09:00:00+00:00",
                sources=[f"ep_20261001_{i:010d}" for i in range(count)],
                existing_id="ep_20261002_9999999999", hashes={}, fact_ids=[],
                provider="extractive", model="extractive")
    rt = Runtime(root, embedder=HashEmbedder())
    entry = rt.store.append(ANN, Kind.EPISODE, narrative_meta(plan),
                            {"Subject": "Dogs", "Content": "Two dogs."}, day=DAY)
    assert len(rt.store.get(ANN, entry.id).sources) == count + 1
    rt.close()


@pytest.mark.parametrize("limit", [2**63 - 1, 10**30])
def test_mcp_reads_its_messages_under_a_request_limit_past_what_a_read_can_ask(
        limit: int) -> None:
    # readline(max_request_bytes + 1) raised OverflowError ("cannot fit 'int' into an
    # index-sized integer"): `everos-reflect mcp` died with a traceback at its first message.
    import io

    from everos_reflect.api.mcp_server import BoundedLines

    message = '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}\n'
    assert BoundedLines(io.BytesIO(message.encode()), limit).readline() == message
