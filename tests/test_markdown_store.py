"""MarkdownStore: layout, appends, deprecations, minimal diffs, locking and concurrency."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import threading
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from everos_reflect.errors import InvalidId, MarkdownError, UnknownEntry
from everos_reflect.markdown import store as store_module
from everos_reflect.markdown import writer
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Kind, UserRef

DAY = date(2026, 10, 12)
REF = UserRef.of("u_andrew")
TS = datetime(2026, 10, 11, 2, tzinfo=UTC)
EXAMPLE_ROOT = Path(__file__).resolve().parent.parent / "memory_root_example"


def add(store: MarkdownStore, subject: str = "s", *, ref: UserRef = REF, day: date = DAY) -> str:
    meta = {"timestamp": TS, "parent_type": "memcell", "parent_id": "mc_1"}
    return store.append(ref, Kind.EPISODE, meta, {"Subject": subject, "Content": "c"}, day=day).id


def test_append_creates_the_file_exactly_as_the_spec_shows(root: Path) -> None:
    store = MarkdownStore(root)
    entry = store.append(
        REF,
        Kind.EPISODE,
        {
            "timestamp": TS,
            "session_id": None,
            "parent_type": "cluster",
            "parent_id": "cl_a1b2c3d4e5f6",
            "sources": ["ep_20260810_0001", "ep_20260910_0002"],
        },
        {"Subject": "Andrew's pet adoption journey", "Content": "He has two dogs."},
        day=DAY,
    )
    path = root / "default_app/default_project/users/u_andrew/episodes/episode-2026-10-12.md"
    assert store.path_for_id(REF, entry.id) == path
    assert path.read_text() == (
        "---\ntype: episode_daily\nschema_version: 1\nuser_id: u_andrew\ndate: '2026-10-12'\n---\n"
        "<!-- entry:ep_20261012_0001 -->\n---\nowner_id: u_andrew\n"
        "timestamp: 2026-10-11T02:00:00+00:00\nparent_type: cluster\nparent_id: cl_a1b2c3d4e5f6\n"
        "sources: [ep_20260810_0001, ep_20260910_0002]\n---\n"
        "## Subject\nAndrew's pet adoption journey\n\n## Content\nHe has two dogs.\n"
        "<!-- /entry:ep_20261012_0001 -->\n"
    )
    assert entry.raw + "\n" == path.read_text()[path.read_text().index("<!--") :]
    assert store.get(REF, entry.id).content == "He has two dogs."


def test_atomic_facts_and_insights_go_to_their_folders(root: Path) -> None:
    store = MarkdownStore(root)
    fact = store.append(
        REF,
        Kind.ATOMIC_FACT,
        {"timestamp": TS, "parent_type": "episode", "parent_id": "ep_20261012_0001"},
        {"Fact": "Andrew has two dogs."},
        day=DAY,
    )
    assert fact.id == "af_20261012_0001"
    path = store.path_for_id(REF, fact.id)
    assert store.rel(path) == (
        "default_app/default_project/users/u_andrew/.atomic_facts/atomic_fact-2026-10-12.md"
    )
    assert path.read_text().startswith("---\ntype: atomic_fact_daily\n")
    assert store.read(path).diagnostics == []


def test_append_adds_only_bytes_at_the_end_and_allocates_the_next_id(root: Path) -> None:
    store = MarkdownStore(root)
    first = add(store)
    path = store.path_for_id(REF, first)
    before = path.read_bytes()
    entry = store.append(
        REF, Kind.EPISODE, {"timestamp": TS, "mood": "ok"}, {"Content": "x"}, day=DAY
    )
    assert entry.id == "ep_20261012_0002"
    block = writer.render_entry(
        entry.id, {"owner_id": "u_andrew", "timestamp": TS, "mood": "ok"}, {"Content": "x"}
    )
    assert path.read_bytes() == before + block.encode()
    stored = store.get(REF, entry.id)
    assert (entry.line, entry.raw) == (stored.line, stored.raw) == (20, block.rstrip("\n"))


def test_append_keeps_crlf_and_adds_a_missing_trailing_newline(root: Path) -> None:
    store = MarkdownStore(root)
    path = store.path_for_id(REF, add(store))
    original = path.read_text().replace("\n", "\r\n").removesuffix("\r\n")
    path.write_bytes(original.encode())
    entry_id = add(store, "second")
    data = path.read_bytes().decode()
    assert data.startswith(original + "\r\n<!-- entry:" + entry_id + " -->\r\n")
    assert data.endswith("\r\n") and "\n" not in data.replace("\r\n", "")
    assert [e.subject for e in store.read(path).entries] == ["s", "second"]
    third = store.append(REF, Kind.EPISODE, {"timestamp": TS}, {"Content": "x"}, day=DAY)
    assert (third.line, third.raw) == (store.get(REF, third.id).line, store.get(REF, third.id).raw)


def test_append_never_reuses_an_id_of_a_broken_or_deprecated_entry(root: Path) -> None:
    store = MarkdownStore(root)
    path = store.path_for_id(REF, add(store))
    with path.open("a") as fh:
        fh.write(
            "<!-- entry:ep_20261012_0005 -->\nbroken by hand\n<!-- /entry:ep_20261012_0005 -->\n"
        )
    assert add(store) == "ep_20261012_0006"


def test_append_refuses_a_file_with_broken_frontmatter_and_leaves_it_alone(root: Path) -> None:
    store = MarkdownStore(root)
    path = store.path_for_id(REF, add(store))
    broken = path.read_text().replace("user_id: u_andrew", "user_id: [oops")
    path.write_text(broken)
    with pytest.raises(MarkdownError, match="invalid YAML") as info:
        add(store)
    assert info.value.path == store.rel(path)
    assert path.read_text() == broken
    assert not store.read(path).ok


@pytest.mark.parametrize("blank", [b"", b"\n", b" \r\n\t\n"])
def test_append_writes_an_empty_or_blank_log_anew(root: Path, blank: bytes) -> None:
    """A log made by `touch` (or left blank) was refused as "missing file frontmatter": no
    Episode could be added to that day, nor a narrative written there, until someone removed
    it. It holds no text to keep."""
    store = MarkdownStore(root)
    path = store.log_path(REF, Kind.EPISODE, DAY)
    path.parent.mkdir(parents=True)
    path.write_bytes(blank)
    assert add(store) == "ep_20261012_0001"
    log = store.read(path)
    assert log.ok and [e.id for e in log.entries] == ["ep_20261012_0001"]
    assert path.read_text().startswith("---\ntype: episode_daily\n")


def test_append_checks_owner_and_timestamp(root: Path) -> None:
    store = MarkdownStore(root)
    with pytest.raises(InvalidId, match="owner_id"):
        store.append(REF, Kind.EPISODE, {"owner_id": "u_mei"}, {"Content": "x"}, day=DAY)
    with pytest.raises(MarkdownError, match="unreadable timestamp"):
        store.append(REF, Kind.EPISODE, {"timestamp": "soon"}, {"Content": "x"}, day=DAY)
    assert list(store.iter_files()) == []


def test_append_without_timestamp_or_day_uses_now_in_utc(root: Path) -> None:
    store = MarkdownStore(root)
    before = datetime.now(UTC).replace(microsecond=0)
    entry = store.append(REF, Kind.EPISODE, {}, {"Content": "x"})
    assert entry.meta["owner_id"] == "u_andrew"
    assert before <= entry.timestamp <= datetime.now(UTC)
    # the entry's own stamp, not `before`: the day may turn between the two
    assert entry.id.startswith(f"ep_{entry.timestamp:%Y%m%d}_")


@pytest.mark.parametrize("many", [False, True])
def test_an_append_as_the_day_turns_stamps_its_entry_on_its_log_day(
    root: Path, monkeypatch: pytest.MonkeyPatch, many: bool
) -> None:
    # The day and the default timestamp were two clock reads: an Episode appended as the year
    # turned was stamped 2027-01-01T00:00:00 inside episode-2026-12-31.md
    reads = iter([datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)])

    class Midnight(datetime):
        @classmethod
        def now(cls, tz: object = None) -> datetime:
            return next(reads, datetime(2027, 1, 1, tzinfo=UTC))

    monkeypatch.setattr(store_module, "datetime", Midnight)
    store = MarkdownStore(root)
    if many:
        [entry] = store.append_many(REF, Kind.EPISODE, [({}, {"Content": "x"})])
    else:
        entry = store.append(REF, Kind.EPISODE, {}, {"Content": "x"})
    assert entry.id == "ep_20261231_0001"
    assert entry.timestamp == datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)


def test_hand_edit_during_an_append_is_kept_not_clobbered(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MarkdownStore(root)
    path = store.path_for_id(REF, add(store))
    real_render = writer.render_entry
    calls: list[int] = []

    def racing_render(*args: object) -> str:
        if not calls:  # a person saves the file while the daemon is composing its edit
            path.write_text(path.read_text() + "\nA note typed meanwhile.\n")
        calls.append(1)
        return real_render(*args)

    monkeypatch.setattr(writer, "render_entry", racing_render)
    entry_id = add(store, "second")
    text = path.read_text()
    assert len(calls) == 2
    assert "A note typed meanwhile.\n<!-- entry:" + entry_id in text
    assert [e.id for e in store.read(path).entries] == ["ep_20261012_0001", entry_id]


def test_writes_leave_no_temp_files_and_keep_the_file_mode(root: Path) -> None:
    store = MarkdownStore(root)
    path = store.path_for_id(REF, add(store))
    os.chmod(path, 0o640)
    add(store)
    store.deprecate(REF, {"ep_20261012_0001": "ep_20261012_0002"})
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert path.stat().st_mode & 0o777 == 0o640


# -- deprecations ------------------------------------------------------------------------------


def test_deprecate_inserts_only_the_mapping_into_the_frontmatter(root: Path) -> None:
    store = MarkdownStore(root)
    a, b, c = add(store), add(store), add(store)
    path = store.path_for_id(REF, a)
    before = path.read_text()
    assert store.deprecate(REF, {a: c}) == {}
    after = path.read_text()
    assert after == before.replace(
        "date: '2026-10-12'\n---\n",
        f"date: '2026-10-12'\ndeprecated_entries:\n  {a}: {c}\n---\n",
        1,
    )
    assert store.deprecate(REF, {b: c}) == {}
    assert path.read_text() == after.replace(f"  {a}: {c}\n", f"  {a}: {c}\n  {b}: {c}\n")
    assert {e.id: e.deprecated_by for e in store.entries(REF, Kind.EPISODE)} == {
        a: c,
        b: c,
        c: None,
    }


def test_deprecate_keeps_hand_edited_frontmatter_bytes(root: Path) -> None:
    store = MarkdownStore(root)
    a, b = add(store), add(store)
    path = store.path_for_id(REF, a)
    hand = path.read_text().replace(
        "---\ntype: episode_daily\nschema_version: 1\nuser_id: u_andrew\ndate: '2026-10-12'\n",
        '---\ndate: "2026-10-12"   # edited\nuser_id:   u_andrew\nschema_version: 1\n'
        "type: episode_daily\nextra: {keep: me}\n",
    )
    path.write_text(hand)
    store.deprecate(REF, {a: b})
    assert path.read_text() == hand.replace(
        "extra: {keep: me}\n", f"extra: {{keep: me}}\ndeprecated_entries:\n  {a}: {b}\n"
    )


def test_flow_style_deprecated_entries_are_extended_in_place(root: Path) -> None:
    store = MarkdownStore(root)
    a, b, c = add(store), add(store), add(store)
    path = store.path_for_id(REF, a)
    text = path.read_text().replace("---\n<!--", f"deprecated_entries: {{{a}: {c}}}\n---\n<!--", 1)
    path.write_text(text)
    store.deprecate(REF, {b: c})
    assert path.read_text() == text.replace(
        f"deprecated_entries: {{{a}: {c}}}\n", f"deprecated_entries:\n  {a}: {c}\n  {b}: {c}\n"
    )


def test_deprecate_is_additive_and_reports_conflicts(root: Path) -> None:
    store = MarkdownStore(root)
    a, b, c = add(store), add(store), add(store)
    store.deprecate(REF, {a: b})
    text = store.path_for_id(REF, a).read_text()
    assert store.deprecate(REF, {a: b}) == {}  # same mapping again: nothing to do
    assert store.deprecate(REF, {a: c}) == {a: b}  # never rewritten
    assert store.path_for_id(REF, a).read_text() == text
    assert store.get(REF, a).deprecated_by == b


def test_deprecate_groups_by_file_and_checks_every_id_first(root: Path) -> None:
    store = MarkdownStore(root)
    old1, old2 = add(store, day=date(2026, 10, 1)), add(store, day=date(2026, 10, 2))
    new = add(store)
    with pytest.raises(UnknownEntry, match="ep_20261001_0009"):
        store.deprecate(REF, {old1: new, "ep_20261001_0009": new})
    assert "deprecated_entries" not in store.path_for_id(REF, old1).read_text()
    store.deprecate(REF, {old1: new, old2: new})
    assert store.get(REF, old1).deprecated_by == new and store.get(REF, old2).deprecated_by == new


def test_undeprecate_removes_only_the_given_keys(root: Path) -> None:
    store = MarkdownStore(root)
    a, b, c = add(store), add(store), add(store)
    path = store.path_for_id(REF, a)
    pristine = path.read_text()
    store.deprecate(REF, {a: c})
    one = path.read_text()
    store.deprecate(REF, {b: c})
    assert store.undeprecate(REF, [b, "ep_20261012_0042"]) == {b: c}
    assert path.read_text() == one
    assert store.undeprecate(REF, [a]) == {a: c}
    assert path.read_text() == pristine


# -- layout ------------------------------------------------------------------------------------


def test_ref_for_path_accepts_only_the_layout_inside_the_root(root: Path, tmp_path: Path) -> None:
    store = MarkdownStore(root)
    users = root / "app1/proj/users/u1"
    assert store.ref_for_path(users / "episodes/episode-2026-10-12.md") == (
        UserRef("app1", "proj", "u1"),
        Kind.EPISODE,
        DAY,
    )
    assert store.ref_for_path(users / ".insights/insight-2026-10-12.md")[1] == Kind.INSIGHT
    for bad in [
        tmp_path / "elsewhere/app1/proj/users/u1/episodes/episode-2026-10-12.md",
        users / ".atomic_facts/episode-2026-10-12.md",
        users / "episodes/episode-2026-13-45.md",
        users / "episodes/notes.md",
        users / "episodes/.episode-2026-10-12.md.abc.tmp",
        root / "app1/proj/people/u1/episodes/episode-2026-10-12.md",
        root / ".hidden/proj/users/u1/episodes/episode-2026-10-12.md",
        root / "app1/proj/users/u1/extra/episodes/episode-2026-10-12.md",
        root / "../root/app1/proj/users/-u/episodes/episode-2026-10-12.md",
    ]:
        assert store.ref_for_path(bad) is None, bad


def test_iter_users_and_files_skip_junk(root: Path) -> None:
    store = MarkdownStore(root)
    add(store)
    add(store, ref=UserRef("acme", "bot", "u_sam"), day=date(2026, 9, 1))
    (root / "default_app/default_project/users/bad name").mkdir()
    (root / "default_app/default_project/users/u_andrew/episodes/notes.md").write_text("x")
    (root / "default_app/default_project/users/u_andrew/episodes/.x.md.1.tmp").write_text("x")
    assert [str(r) for r in store.iter_users()] == [
        "acme/bot/u_sam",
        "default_app/default_project/u_andrew",
    ]
    assert [store.rel(p) for p in store.iter_files(kinds=[Kind.EPISODE])] == [
        "acme/bot/users/u_sam/episodes/episode-2026-09-01.md",
        "default_app/default_project/users/u_andrew/episodes/episode-2026-10-12.md",
    ]
    assert list(store.iter_files(REF, [Kind.ATOMIC_FACT])) == []


def test_get_unknown_entry_raises(root: Path) -> None:
    store = MarkdownStore(root)
    add(store)
    for missing in ["ep_20261012_0002", "ep_20200101_0001"]:
        with pytest.raises(UnknownEntry, match=missing):
            store.get(REF, missing)


def test_read_reports_invalid_utf8_as_fatal(root: Path) -> None:
    store = MarkdownStore(root)
    path = store.path_for_id(REF, add(store))
    path.write_bytes(path.read_bytes() + b"\nbad \xff byte\n")
    log = store.read(path)
    assert not log.ok and log.diagnostics[0].line == len(path.read_bytes().splitlines())
    with pytest.raises(MarkdownError):
        add(store)


def test_lock_files_live_under_index_locks(root: Path) -> None:
    store = MarkdownStore(root)
    path = store.path_for_id(REF, add(store))
    locks = list((root / ".index/locks").iterdir())
    assert len(locks) == 1 and locks[0].name.startswith("md-")
    with store.lock(path), store.lock(path):  # re-entrant in one thread
        pass


def test_example_root_round_trips_through_a_no_op_store_write(tmp_path: Path) -> None:
    copy = tmp_path / "example"
    shutil.copytree(EXAMPLE_ROOT, copy)
    store = MarkdownStore(copy)
    files = list(store.iter_files())
    before = {p: p.read_bytes() for p in files}
    for path in files:
        ref, _, _ = store.ref_for_path(path)
        ids = [e.id for e in store.read(path).entries]
        store.undeprecate(ref, ids)  # nothing recorded: must not touch a byte
    assert {p: p.read_bytes() for p in files} == before


# -- concurrency -------------------------------------------------------------------------------


def _append_many(root: str, worker: int, count: int) -> list[str]:
    store = MarkdownStore(root)
    return [add(store, f"w{worker}-{i}") for i in range(count)]


def test_two_processes_appending_lose_nothing_and_never_share_an_id(root: Path) -> None:
    count = 200
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.starmap(_append_many, [(str(root), 0, count), (str(root), 1, count)])
    ids = results[0] + results[1]
    assert len(set(ids)) == 2 * count
    entries = MarkdownStore(root).entries(REF, Kind.EPISODE)
    assert sorted(e.id for e in entries) == sorted(ids)
    assert sorted(int(i.rsplit("_", 1)[1]) for i in ids) == list(range(1, 2 * count + 1))
    for worker in (0, 1):  # each worker's entries appear in its own order
        mine = [e.subject for e in entries if e.subject.startswith(f"w{worker}-")]
        assert mine == [f"w{worker}-{i}" for i in range(count)]


def test_threads_sharing_one_store_serialize_their_appends(root: Path) -> None:
    store = MarkdownStore(root)
    results: dict[int, list[str]] = {}

    def work(n: int) -> None:
        results[n] = [add(store, f"t{n}-{i}") for i in range(25)]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [i for n in range(3) for i in results[n]]
    assert len(set(ids)) == 75
    assert sorted(e.id for e in store.entries(REF, Kind.EPISODE)) == sorted(ids)
