"""VectorIndex: the LanceDB tables of vectors and full text, keyed by tenant + user + id."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import EmbedderMismatch, EverosError, InvalidId
from everos_reflect.index import vectors
from everos_reflect.index.filters import sql_str, where_clause
from everos_reflect.index.vectors import VectorIndex
from everos_reflect.model import Kind, UserRef

EMB = HashEmbedder(32)
ANDREW = UserRef.of("u_andrew")
BETTY = UserRef.of("u_betty")
OTHER_APP = UserRef("app2", "default_project", "u_andrew")


def row(ref: UserRef, entry_id: str, text: str, **extra: Any) -> dict[str, Any]:
    base = {
        "id": entry_id,
        "app_id": ref.app,
        "project_id": ref.project,
        "user_id": ref.user_id,
        "ts": 1_760_000_000.0,
        "timestamp": "2025-10-09T08:53:20+00:00",
        "subject": f"subject of {entry_id}",
        "text": text,
        "parent_type": "memcell",
        "parent_id": "mc_1",
        "session_id": "s1",
        "content_hash": "h" + entry_id,
        "path": f"{ref}/episodes/episode-2025-10-09.md",
        "embed_model": EMB.name,
        "vector": EMB.embed([text])[0],
    }
    base.update(extra)
    return base


@pytest.fixture
def index(tmp_path: Path) -> VectorIndex:
    return VectorIndex(tmp_path / "lancedb", EMB.dim)


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [r["id"] for r in rows]


def test_upsert_stores_every_column(index: VectorIndex) -> None:
    index.upsert(Kind.EPISODE, [row(ANDREW, "ep_1", "Andrew adopted a dog", sources=["a", "b"])])
    (stored,) = index.rows(Kind.EPISODE)
    assert stored["id"] == "ep_1"
    assert (stored["app_id"], stored["project_id"], stored["user_id"]) == (
        "default_app",
        "default_project",
        "u_andrew",
    )
    assert stored["kind"] == "episode"
    assert stored["ts"] == 1_760_000_000.0
    assert stored["sources"] == ["a", "b"]
    assert stored["deprecated_by"] is None
    assert stored["embed_model"] == "hash:32"
    assert index.count(Kind.EPISODE) == 1
    assert index.count(Kind.ATOMIC_FACT) == 0


def test_upsert_replaces_same_id_and_keeps_full_text_fresh(index: VectorIndex) -> None:
    index.upsert("episode", [row(ANDREW, "ep_1", "Andrew has a parrot named Kiwi")])
    assert ids(index.search_text("episode", "parrot")) == ["ep_1"]
    index.upsert("episode", [row(ANDREW, "ep_1", "Andrew has a dog named Toby")])
    assert index.count("episode") == 1
    assert index.search_text("episode", "parrot") == []
    assert ids(index.search_text("episode", "Toby")) == ["ep_1"]
    index.optimize()
    assert ids(index.search_text("episode", "Toby")) == ["ep_1"]
    index.upsert("episode", [row(ANDREW, "ep_2", "Toby chewed the sofa")])
    assert sorted(ids(index.search_text("episode", "Toby"))) == ["ep_1", "ep_2"]


def test_full_text_search_covers_subject(index: VectorIndex) -> None:
    index.upsert("episode", [row(ANDREW, "ep_1", "nothing here", subject="Pet adoption journey")])
    assert ids(index.search_text("episode", "adoption")) == ["ep_1"]


def test_full_text_query_syntax_is_taken_as_plain_words(index: VectorIndex) -> None:
    index.upsert("episode", [row(ANDREW, "ep_1", 'she said "the dog" barked', subject="Dogs")])
    for query in ['"the dog"', "dog AND (", "dog -x +y title:z *", "dog's"]:
        assert ids(index.search_text("episode", query)) == ["ep_1"], query


def test_same_id_for_different_users_and_tenants_are_separate(index: VectorIndex) -> None:
    index.upsert(
        "episode",
        [row(ANDREW, "ep_1", "a"), row(BETTY, "ep_1", "b"), row(OTHER_APP, "ep_1", "c")],
    )
    assert index.count("episode") == 3
    index.delete("episode", ANDREW, ["ep_1"])
    assert sorted(r["text"] for r in index.rows("episode")) == ["b", "c"]


def test_delete_and_deprecate_touch_only_named_ids(index: VectorIndex) -> None:
    index.upsert("episode", [row(ANDREW, f"ep_{i}", f"text {i}") for i in range(4)])
    index.set_deprecated("episode", ANDREW, ["ep_0", "ep_1"], "ep_9")
    index.set_deprecated("episode", BETTY, ["ep_2"], "ep_9")  # another user: no effect
    index.delete("episode", ANDREW, ["ep_3", "ep_missing"])
    state = {r["id"]: r["deprecated_by"] for r in index.rows("episode")}
    assert state == {"ep_0": "ep_9", "ep_1": "ep_9", "ep_2": None}
    index.set_deprecated("episode", ANDREW, ["ep_1"], None)
    assert index.count("episode", "deprecated_by IS NULL") == 2


def test_set_deprecated_many_gives_each_row_its_own_value_and_keeps_the_rest(
    index: VectorIndex,
) -> None:
    index.upsert("episode", [row(ANDREW, f"ep_{i}", f"text {i}") for i in range(4)]
                 + [row(BETTY, "ep_0", "betty's")])
    index.set_deprecated("episode", ANDREW, ["ep_3"], "ep_8")
    before = index.get_vectors("episode", ANDREW, ["ep_0"])["ep_0"]

    index.set_deprecated_many("episode", [(ANDREW, "ep_0", "ep_9"), (ANDREW, "ep_1", "ep_7"),
                                          (ANDREW, "ep_3", None), (ANDREW, "ep_missing", "ep_9")])

    state = {(r["user_id"], r["id"]): r["deprecated_by"] for r in index.rows("episode")}
    assert state == {("u_andrew", "ep_0"): "ep_9", ("u_andrew", "ep_1"): "ep_7",
                     ("u_andrew", "ep_2"): None, ("u_andrew", "ep_3"): None,
                     ("u_betty", "ep_0"): None}
    assert index.count("episode") == 5  # nothing inserted for the unknown id
    [kept] = index.rows("episode", "id = 'ep_0' AND user_id = 'u_andrew'")
    assert kept["text"] == "text 0" and kept["subject"] == "subject of ep_0"
    np.testing.assert_array_equal(index.get_vectors("episode", ANDREW, ["ep_0"])["ep_0"], before)
    assert [h["id"] for h in index.search_text("episode", "text 1", k=1)] == ["ep_1"]


def test_get_vectors_returns_stored_vectors_by_id(index: VectorIndex) -> None:
    first, second = row(ANDREW, "ep_1", "dog"), row(ANDREW, "ep_2", "cat")
    index.upsert("episode", [first, second, row(BETTY, "ep_1", "tax")])
    found = index.get_vectors("episode", ANDREW, ["ep_2", "ep_1", "ep_404"])
    assert sorted(found) == ["ep_1", "ep_2"]
    np.testing.assert_allclose(found["ep_1"], first["vector"], rtol=1e-6)
    np.testing.assert_allclose(found["ep_2"], second["vector"], rtol=1e-6)
    assert found["ep_1"].dtype == np.float32
    assert index.get_vectors("episode", ANDREW, []) == {}


def test_get_vectors_many_fetches_several_users_in_chunks(index: VectorIndex) -> None:
    rows = [row(ANDREW, "ep_1", "dog"), row(BETTY, "ep_1", "tax"), row(OTHER_APP, "ep_1", "cat")]
    index.upsert("episode", rows)
    wanted = {ANDREW: ["ep_1"], BETTY: ["ep_1", "ep_404"], OTHER_APP: ["ep_1"]}
    found = index.get_vectors_many("episode", wanted, chunk=2)
    assert {ref: sorted(v) for ref, v in found.items()} == {
        ANDREW: ["ep_1"], BETTY: ["ep_1"], OTHER_APP: ["ep_1"]}
    for ref, expected in zip((ANDREW, BETTY, OTHER_APP), rows, strict=True):
        np.testing.assert_allclose(found[ref]["ep_1"], expected["vector"], rtol=1e-6)


def test_search_vector_orders_by_cosine_and_filters(index: VectorIndex) -> None:
    index.upsert(
        "episode",
        [
            row(ANDREW, "ep_dog", "Andrew adopted a dog named Toby"),
            row(ANDREW, "ep_tax", "Andrew filed his tax return"),
            row(BETTY, "ep_dog", "Betty adopted a dog named Rex"),
        ],
    )
    query = EMB.embed(["adopted a dog named Toby"])[0]
    hits = index.search_vector("episode", query, k=3, where=where_clause(user_id="u_andrew"))
    assert ids(hits) == ["ep_dog", "ep_tax"]
    assert hits[0]["_distance"] < hits[1]["_distance"]
    assert {h["user_id"] for h in hits} == {"u_andrew"}


def test_equal_scores_come_in_id_order_whatever_order_rows_were_written(
        index: VectorIndex) -> None:
    """Rows that tie (the same text: a fact a merge restates) came back in the order LanceDB
    stored them, which a rebuild from Markdown changes: the same search ranked two entries
    the other way round (other scores, other order) after ``reindex``."""
    for entry_id in ("ep_3", "ep_1", "ep_2"):
        index.upsert("episode", [row(ANDREW, entry_id, "Toby weighs 31 kg now")])
    index.upsert("episode", [row(ANDREW, "ep_1", "Toby weighs 31 kg now", session_id="s2")])
    query = EMB.embed(["Toby weighs 31 kg now"])[0]
    assert ids(index.search_vector("episode", query, k=3)) == ["ep_1", "ep_2", "ep_3"]
    assert ids(index.search_text("episode", "Toby weighs", k=3)) == ["ep_1", "ep_2", "ep_3"]


def test_where_clause_validates_and_quotes() -> None:
    assert where_clause() is None
    assert where_clause(user_id="u1", include_deprecated=False) == (
        "user_id = 'u1' AND deprecated_by IS NULL"
    )
    assert sql_str("it's") == "'it''s'"
    with pytest.raises(InvalidId):
        where_clause(user_id="x' OR '1'='1")


def test_quotes_in_ids_cannot_widen_a_delete(index: VectorIndex) -> None:
    index.upsert("episode", [row(ANDREW, "ep_1", "a"), row(ANDREW, "ep_2", "b")])
    index.delete("episode", ANDREW, ["x' OR '1'='1"])
    assert index.count("episode") == 2


def test_bad_rows_are_rejected_before_anything_is_written(index: VectorIndex) -> None:
    good = row(ANDREW, "ep_1", "a")
    with pytest.raises(EverosError, match="vector must be 32 finite floats"):
        index.upsert("episode", [good, row(ANDREW, "ep_2", "b", vector=np.ones(5))])
    with pytest.raises(EverosError, match="lacks embed_model"):
        index.upsert("episode", [good, row(ANDREW, "ep_2", "b", embed_model="")])
    with pytest.raises(EverosError, match="same entry id twice"):
        index.upsert("episode", [good, good])
    with pytest.raises(InvalidId):
        index.upsert("episode", [row(ANDREW, "ep_2", "b", user_id="../etc")])
    assert index.count("episode") == 0


def test_embed_model_reports_what_made_the_vectors(index: VectorIndex) -> None:
    assert index.embed_model("episode") is None
    index.upsert("episode", [row(ANDREW, "ep_1", "a")])
    assert index.embed_model("episode") == "hash:32"
    index.upsert("episode", [row(ANDREW, "ep_2", "b", embed_model="other")])
    assert index.embed_model("episode") == "hash:32, other"


def test_reset_drops_everything(index: VectorIndex) -> None:
    index.upsert("episode", [row(ANDREW, "ep_1", "a")])
    index.upsert(Kind.ATOMIC_FACT, [row(ANDREW, "af_1", "fact")])
    index.reset()
    assert index.count("episode") == 0
    assert index.count(Kind.ATOMIC_FACT) == 0
    index.upsert("episode", [row(ANDREW, "ep_1", "rebuilt")])
    assert ids(index.search_text("episode", "rebuilt")) == ["ep_1"]


class Killed(BaseException):
    """A SIGKILL in the middle of a deletion (nothing after it runs)."""


def test_a_reset_killed_while_deleting_leaves_tables_the_next_run_can_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench/chaos.py found it: a reindex killed inside ``drop_table`` left a table whose
    manifest named deleted data files, and every later read failed until the next reindex."""
    from everos_reflect.index import vectors

    index = VectorIndex(tmp_path / "lancedb", EMB.dim)
    index.upsert("episode", [row(ANDREW, f"ep_{i}", f"text {i}") for i in range(3)])
    index.upsert("episode", [row(ANDREW, "ep_9", "a second data file")])

    def half_delete(folder: Path) -> None:
        for data in sorted(Path(folder).rglob("data/*.lance"))[:1]:
            data.unlink()
        raise Killed(str(folder))

    def drop_table(name: str, **_: Any) -> None:
        half_delete(tmp_path / "lancedb" / f"{name}.lance")

    monkeypatch.setattr(index._db, "drop_table", drop_table)
    monkeypatch.setattr(vectors.shutil, "rmtree", lambda p, **_: half_delete(p))
    with pytest.raises(Killed):
        index.reset()
    monkeypatch.undo()

    after = VectorIndex(tmp_path / "lancedb", EMB.dim)  # the next process
    after.upsert("episode", [row(ANDREW, "ep_1", "rebuilt after the crash")])
    assert after.count("episode") == 1
    assert ids(after.search_text("episode", "rebuilt")) == ["ep_1"]
    after.reset()
    assert not list((tmp_path / "lancedb").glob(".dropped-*"))


def test_a_second_handle_sees_writes_of_the_first(tmp_path: Path) -> None:
    writer = VectorIndex(tmp_path / "lancedb", EMB.dim)
    reader = VectorIndex(tmp_path / "lancedb", EMB.dim)
    assert reader.count("episode") == 0
    writer.upsert("episode", [row(ANDREW, "ep_1", "shared")])
    assert reader.count("episode") == 1
    assert ids(reader.search_text("episode", "shared")) == ["ep_1"]


def test_opening_with_another_dimension_asks_for_reindex(tmp_path: Path) -> None:
    VectorIndex(tmp_path / "lancedb", EMB.dim).upsert("episode", [row(ANDREW, "ep_1", "a")])
    other = VectorIndex(tmp_path / "lancedb", 16)
    with pytest.raises(EmbedderMismatch, match=r"32-dimensional .* \(16 dimensions\).*reindex"):
        other.count("episode")
    other.reset()
    assert other.count("episode") == 0


def test_optimize_runs_safely_alongside_writers(index: VectorIndex) -> None:
    errors: list[BaseException] = []

    def write(user: str) -> None:
        ref = UserRef.of(user)
        try:
            for n in range(8):
                index.upsert("episode", [row(ref, f"ep_{n}", f"{user} note {n}")])
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(f"u{i}",)) for i in range(3)]
    for t in writers:
        t.start()
    for _ in range(3):
        index.optimize()
    for t in writers:
        t.join()
    assert errors == []
    assert index.count("episode") == 24
    assert index.optimize()["episodes"] == 24


def test_append_adds_new_rows_and_refuses_a_repeated_key(index: VectorIndex) -> None:
    index.append("episode", [row(ANDREW, "ep_1", "dog"), row(BETTY, "ep_1", "tax")])
    assert index.count("episode") == 2
    assert sorted(index.get_vectors("episode", BETTY, ["ep_1"])) == ["ep_1"]
    with pytest.raises(EverosError):
        index.append("episode", [row(ANDREW, "ep_2", "a"), row(ANDREW, "ep_2", "b")])
    assert index.count("episode") == 2


def test_get_vectors_many_ignores_same_named_users_of_other_tenants(index: VectorIndex) -> None:
    index.upsert("episode", [row(ANDREW, "ep_1", "dog"), row(OTHER_APP, "ep_1", "cat"),
                             row(OTHER_APP, "ep_2", "owl")])
    found = index.get_vectors_many("episode", {ANDREW: ["ep_1", "ep_2"]})
    assert {ref: sorted(v) for ref, v in found.items()} == {ANDREW: ["ep_1"]}


def test_ann_build_runs_outside_the_write_lock_and_writers_go_on(tmp_path: Path) -> None:
    """Upserts from other threads while ``optimize`` trains the IVF_PQ index: none fails,
    some land during the build (it does not hold the write lock), and the index is built."""
    index = VectorIndex(tmp_path / "lancedb", EMB.dim, ann_min_rows=300)
    index.upsert("episode", [row(ANDREW, f"ep_{n}", f"note {n} about {n % 7}") for n in range(400)])
    building = threading.Event()
    done = threading.Event()
    during: list[int] = []
    errors: list[BaseException] = []
    real = index._build_file_lock

    class _Spy:
        def __enter__(self):
            real.__enter__()
            building.set()
            return self

        def __exit__(self, *exc):
            done.set()
            return real.__exit__(*exc)

    index._build_file_lock = _Spy()  # type: ignore[assignment]

    def write() -> None:
        try:
            building.wait(60)
            n = 0
            while not done.is_set() and n < 200:
                index.upsert("episode", [row(BETTY, f"ep_{n}", f"betty {n}")])
                during.append(n)
                n += 1
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    index.optimize()
    writer.join()
    assert errors == []
    assert during, "no write completed while the index was being built"
    names = {ix.name for ix in index._table("episode").list_indices()}
    assert "vector_idx" in names
    assert index.count("episode") == 400 + len(during)
    assert sorted(index.get_vectors("episode", BETTY, [f"ep_{n}" for n in during])) == sorted(
        f"ep_{n}" for n in during)


def _lock_is_free(index: VectorIndex) -> bool:
    """Whether another thread could take the write lock right now."""
    free: list[bool] = []

    def probe() -> None:
        got = index._thread_lock.acquire(timeout=0)
        if got:
            index._thread_lock.release()
        free.append(got)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return free[0]


def test_compaction_runs_outside_the_write_lock_and_a_write_lands_during_it(
    index: VectorIndex
) -> None:
    """Writers never wait for a compaction: one writes (rows updated, deprecated, deleted)
    while it runs, and everything it wrote is there afterwards."""
    for n in range(6):  # six small fragments: something to compact
        index.upsert("episode", [row(ANDREW, f"ep_{n}", f"note {n}")])
    table = index._table("episode")
    real = table.optimize
    during: list[str] = []

    def optimize_while_writing(**kwargs: Any) -> Any:
        def write() -> None:
            index.upsert("episode", [row(ANDREW, "ep_0", "note 0, rewritten"),
                                     row(BETTY, "ep_9", "betty's")])
            index.set_deprecated_many("episode", [(ANDREW, "ep_1", "ep_0")])
            index.delete("episode", ANDREW, ["ep_2"])
            during.append("written")

        writer = threading.Thread(target=write)
        writer.start()
        writer.join(60)  # with the write lock held here, this would time out
        assert during == ["written"]
        return real(**kwargs)

    table.optimize = optimize_while_writing  # type: ignore[method-assign]
    index.optimize()
    del table.optimize

    assert during == ["written"]
    stored = {(r["user_id"], r["id"]): r for r in index.rows("episode")}
    assert len(stored) == 6
    assert stored[("u_andrew", "ep_0")]["text"] == "note 0, rewritten"
    assert stored[("u_andrew", "ep_1")]["deprecated_by"] == "ep_0"
    assert ("u_andrew", "ep_2") not in stored and ("u_betty", "ep_9") in stored


def test_a_compaction_refused_by_concurrent_writes_is_retried_then_run_under_the_lock(
    index: VectorIndex
) -> None:
    index.upsert("episode", [row(ANDREW, "ep_1", "note")])
    table = index._table("episode")
    real = table.optimize
    calls: list[bool] = []  # per call: whether the write lock was free

    def refused(**kwargs: Any) -> Any:
        calls.append(_lock_is_free(index))
        if len(calls) <= vectors.COMPACTION_ATTEMPTS:
            raise RuntimeError("lance error: Retryable commit conflict for version 7: This "
                               "Rewrite transaction was preempted by concurrent transaction")
        return real(**kwargs)

    table.optimize = refused  # type: ignore[method-assign]
    index.optimize()

    assert calls == [True] * vectors.COMPACTION_ATTEMPTS + [False]
    assert index.compaction_conflicts == vectors.COMPACTION_ATTEMPTS

    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("lance error: IO error")

    table.optimize = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="IO error"):
        index.optimize()
    del table.optimize


def test_a_table_without_its_versions_folder_is_missing_not_empty(tmp_path: Path) -> None:
    # `rm -rf episodes.lance/_versions`: LanceDB found no table and the next use made a new,
    # empty one in the same folder, which a scan took for whole (nothing embedded again).
    import shutil

    from everos_reflect.errors import VectorIndexUnreadable

    VectorIndex(tmp_path / "lancedb", EMB.dim).upsert("episode", [row(ANDREW, "ep_1", "a")])
    shutil.rmtree(tmp_path / "lancedb" / "episodes.lance" / "_versions")
    index = VectorIndex(tmp_path / "lancedb", EMB.dim)
    with pytest.raises(VectorIndexUnreadable, match=r"episodes .*_versions.*reindex"):
        index.count("episode")  # before a scan: never an empty table made over the remnant
    assert Kind.EPISODE in index.missing()
    assert not (tmp_path / "lancedb" / "episodes.lance").exists()  # the remnant moved aside
    assert not list((tmp_path / "lancedb").glob(".dropped-*"))  # and deleted
    assert index.count("episode") == 0  # made anew, in a clean folder
    assert Kind.EPISODE not in index.missing()


def test_an_upsert_of_new_rows_appends_them_and_one_of_a_known_row_replaces_it(
        index: VectorIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``add`` upserts one row new to the table: matched against every key
    (``merge_insert``), it read every row written since the key index was built, ~100 ms
    of the add's answer once a Reflection had written hundreds of fragments (loaded). Rows
    said new, none of whose keys the table holds, are appended; a batch holding a known key
    is matched, so an entry still has one row."""
    index.upsert(Kind.EPISODE, [row(ANDREW, "ep_1", "Andrew has a parrot")])
    table = index._table(Kind.EPISODE)
    merges: list[int] = []
    real_merge = type(table).merge_insert

    def merge_insert(self: Any, on: Any) -> Any:
        merges.append(1)
        return real_merge(self, on)

    monkeypatch.setattr(type(table), "merge_insert", merge_insert)
    index.upsert(Kind.EPISODE, [row(ANDREW, "ep_2", "Andrew adopted a dog"),
                                row(BETTY, "ep_1", "Betty has a cat")], new=True)
    assert merges == []
    # said new, one of them is there (a row a killed sync wrote): matched, not added twice
    index.upsert(Kind.EPISODE, [row(ANDREW, "ep_3", "Andrew walks Toby"),
                                row(ANDREW, "ep_1", "Andrew gave the parrot away")], new=True)
    assert merges == [1]
    stored = {(r["user_id"], r["id"]): r["text"] for r in index.rows(Kind.EPISODE)}
    assert stored == {("u_andrew", "ep_1"): "Andrew gave the parrot away",
                      ("u_andrew", "ep_2"): "Andrew adopted a dog",
                      ("u_betty", "ep_1"): "Betty has a cat",
                      ("u_andrew", "ep_3"): "Andrew walks Toby"}
    assert index.count(Kind.EPISODE) == 4


def test_an_entry_a_killed_sync_left_in_the_vectors_alone_is_written_once_by_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LanceDB is written before SQLite; killed in between, the index has no row for the
    entry and the vectors have one. The next sync takes it for new (it appends new rows):
    the row there is replaced, not doubled."""
    from everos_reflect.index.sync import Indexer
    from everos_reflect.runtime import Runtime

    class Killed(BaseException):
        pass

    rt = Runtime(tmp_path, embedder=EMB)
    try:
        entry = rt.store.append(ANDREW, Kind.EPISODE, {}, {"Subject": "Pets",
                                                           "Content": "Andrew adopted a dog."})
        path = rt.store.path_for_id(ANDREW, entry.id)

        def killed(self: Any, jobs: Any) -> Any:
            raise Killed

        with monkeypatch.context() as patch:
            patch.setattr(Indexer, "_write_sqlite", killed)
            with pytest.raises(Killed):
                Indexer(rt).sync_path(path)
        assert rt.vectors.count(Kind.EPISODE) == 1
        assert rt.db().execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0

        Indexer(rt).sync_path(path)

        assert rt.vectors.count(Kind.EPISODE) == 1
        assert [r["id"] for r in rt.vectors.rows(Kind.EPISODE)] == [entry.id]
    finally:
        rt.close()
