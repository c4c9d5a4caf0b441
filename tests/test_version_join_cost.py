"""What the join of a fact's newer version costs the clustering, and that it decides as before.

Session 38 (issue 15): the join made one owner's placement cost three times what it had
(bench/results/clustering_s37.md). What it does now instead, each checked here:

- an Episode is read for a change only when it would found a cluster, inside the run that
  places it (``UserClusters.assign_run``'s ``version_of``); one that tells a change no longer
  ends the run;
- ``tells_newer_version`` keeps what each text alone gives (its sentences, the names opening
  them) in a cache bounded by entries and bytes, and reads a member's sentence only once its
  subject is one a sentence of the later text that tells a change is about;
- each decides exactly as the reading it replaces (a copy of it is the reference below).
"""

from __future__ import annotations

import gc
import json
import random
import tracemalloc
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.clustering import service
from everos_reflect.clustering.matrix import UserClusters
from everos_reflect.clustering.service import ClusterService
from everos_reflect.llm import extractive
from everos_reflect.llm.extractive import tells_change, tells_newer_version
from everos_reflect.settings import ClusteringSettings
from tests.test_cluster_service import REF, FakeRuntime, episode, snapshot, store_rows
from tests.test_cluster_version_join import DIM, JOB, JOB_VEC, LET_GO, T0, at, index

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def empty_cache() -> None:
    extractive._VERSION_TEXTS.clear()
    extractive._VERSION_TEXTS_HELD[0] = 0


def reference(earlier: str, later: str) -> bool:
    """``tells_newer_version`` as session 37 wrote it: every sentence of both texts read,
    for every pair."""
    x = extractive
    old_texts, new_texts = x._version_sentences(earlier), x._version_sentences(later)
    person = x._main_entity([*old_texts, *new_texts])
    day = date(2000, 1, 1)
    sentences = []
    for texts, when in ((old_texts, day), (new_texts, date(2000, 1, 2))):
        entity = None
        for t in texts:
            t, entity = x._resolve_pronoun(t, entity, person)
            sentences.append(x._read(t, when, len(sentences)))
    for s in sentences:
        s.subject = x._subject(s.text, person)
        s.person = person.lower() if person else None
        s.holder = x._holder(s.text, person)
    olds, news = sentences[:len(old_texts)], sentences[len(old_texts):]
    return any(x._versions(old, new, None, x.VERSION_COSINE)
               for new in news if x._marks_change(new) for old in olds)


def reference_tells_change(text: str) -> bool:
    """``tells_change`` as session 37 wrote it: every version sentence read in full."""
    x = extractive
    if not x._may_tell_change(text) or not any(r.search(text) for r in x._CHANGE_MARKS):
        return False
    return any(x._marks_change(x._read(t)) for t in x._version_sentences(text))


def _story_texts() -> list[list[str]]:
    stories = json.loads((ROOT / "bench" / "state_stories.json").read_text())["stories"]
    return [[e["text"] for e in s["episodes"]] for s in stories]


def _pronoun(text: str, name: str) -> str:
    """The text with its leading name said as a pronoun (what the pronoun rule reads)."""
    return "She" + text[len(name):] if text.startswith(name + " ") else text


def _corpus_pairs() -> list[tuple[str, str]]:
    """Pairs the join meets: each story's Episodes one against a later one, alone, joined
    into one text (with a pronoun for the name), and set among another story's sentences
    (two people in one text: who the text is about is then read from both)."""
    rng = random.Random(38)
    stories = _story_texts()
    pairs: list[tuple[str, str]] = []
    for n, texts in enumerate(stories):
        other = stories[(n + 7) % len(stories)]
        name = texts[0].split()[0]
        for i, a in enumerate(texts):
            for b in texts[i + 1:]:
                pairs.append((a, b))
                pairs.append((" ".join([a, *other]), b))
                pairs.append((a, " ".join([*other[:1], b, _pronoun(b, name)])))
        pairs.append((" ".join(texts[:-1]), " ".join([texts[0], _pronoun(texts[-1], name)])))
    flat = [t for texts in stories for t in texts]
    pairs += [(rng.choice(flat), rng.choice(flat)) for _ in range(300)]
    return pairs


def test_tells_newer_version_answers_as_the_reading_it_replaces() -> None:
    pairs = _corpus_pairs()
    got = [tells_newer_version(a, b) for a, b in pairs]
    assert got == [reference(a, b) for a, b in pairs]
    assert sum(got) > 50  # the corpus holds many versions, not only refusals
    texts = sorted({t for pair in pairs for t in pair})
    told = [tells_change(t) for t in texts]
    assert told == [reference_tells_change(t) for t in texts]
    assert sum(told) > 50


OPENERS = ["", "On Monday ", "In June, ", "Last week ", "Yesterday ", "In May the ",
           "During the summer holidays ", "Then "]


@pytest.mark.parametrize("pattern", extractive._CHANGE_MARKS, ids=lambda p: p.pattern[:30])
def test_a_sentence_the_word_gate_stops_tells_no_change_when_read(pattern) -> None:
    """``_sentence_tells_change`` leaves unread a sentence the gate stops: read, it must tell
    no change, whatever opens it (a dismissal is looked for after an opening phrase)."""
    @settings(max_examples=150, deadline=None, database=None)
    @given(st.sampled_from(OPENERS), st.from_regex(pattern, alphabet=st.characters(
        codec="ascii")), st.sampled_from(["", ".", " now.", " last year."]))
    def check(opener: str, middle: str, end: str) -> None:
        text = f"{opener}{middle}{end}"
        read = extractive._marks_change(extractive._reading(text))
        assert extractive._sentence_tells_change(text) == read
        assert extractive._may_tell_change(text) or not read

    check()


SENTENCES = [
    JOB, LET_GO, "Noor lives in Leeds.", "Noor moved to York.", "She moved to York.",
    "He quit his job.", "Noor's car was stolen.", "Noor drives a Golf.", "Moved to Lyon.",
    "Left Lyon for Paris.", "Bea works at the bakery.", "Bea quit her job.",
    "Bea no longer drives.", "Noor cycles to work now.", "Noor takes the bus to work.",
    "Her flat in Leeds was let go.", "Noor rents a flat in Leeds.", "Is Noor still at Arup?",
    "Noor wants to move to Oslo.", "Noor booked flights to Rome.", "Ana was let go.",
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=5),
       st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=5))
def test_any_mix_of_sentences_is_read_as_before(old: list[str], new: list[str]) -> None:
    earlier, later = " ".join(old), " ".join(new)
    assert tells_newer_version(earlier, later) == reference(earlier, later)


def test_a_later_text_is_split_once_for_all_the_members_it_is_read_against(
        empty_cache, monkeypatch: pytest.MonkeyPatch) -> None:
    split = []
    real = extractive._version_sentences
    monkeypatch.setattr(extractive, "_version_sentences",
                        lambda text: split.append(text) or real(text))
    later = "Noor was let go from the studio on the ninth of May."
    members = [f"Noor works at studio number {n}." for n in range(8)]
    for member in members:
        tells_newer_version(member, later)
    # not once per member read; the members not at all since session 49: the end names
    # "ninth", which none of them says, so each is refused by its words whole
    # (_may_hold_version) before it is split
    assert split == [later]


def test_a_member_sentence_about_someone_else_is_not_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    read = []
    real = extractive._read
    monkeypatch.setattr(extractive, "_read",
                        lambda text, *a: read.append(text) or real(text, *a))
    assert not tells_newer_version("Hana works at Arup. Hana lives in Leeds.",
                                   "Noor was let go.")
    assert read == ["Noor was let go."]  # the later's sentence only
    read.clear()
    assert tells_newer_version("Hana lives in Leeds. Noor works at Arup.", "Noor was let go.")
    assert "Hana lives in Leeds." not in read and "Noor works at Arup." in read


def test_an_edited_text_gets_the_verdict_of_its_new_words() -> None:
    """The caches are keyed by the text itself: an edit is another key, nothing stale."""
    member = "Noor works at Arup. Noor lives in Leeds."
    assert tells_newer_version(member, LET_GO)
    edited = "Noor booked flights to Rome. Noor lives in Leeds."
    assert not tells_newer_version(edited, LET_GO)
    assert tells_newer_version(member, LET_GO)  # and back
    assert not tells_newer_version(member, "Noor was let go from the tennis club? No.")
    assert tells_change(LET_GO) and not tells_change("Noor was let in.")


def test_an_edited_member_is_read_with_its_new_text_by_the_clustering(tmp_path: Path) -> None:
    rt = FakeRuntime(tmp_path, ClusteringSettings())
    index(rt, ("ep_20260302_0001", JOB, T0, JOB_VEC))
    # the member's text changes (same id, same vector): the dismissal then ends nothing
    edited = episode("ep_20260302_0001", "Noor booked flights to Rome.", T0)
    store_rows(rt, [edited], [JOB_VEC])
    ClusterService(rt).on_entries_indexed(REF, [edited], {edited.id: JOB_VEC})
    out = index(rt, ("ep_20260306_0001", LET_GO, T0 + timedelta(days=4), at(0.40)))
    assert out["ep_20260306_0001"] == "new"


def _long_text(n: int, sentences: int = 3) -> str:
    """A distinct text of ~650 characters per sentence (no two alike)."""
    return " ".join(f"Noor{n} met Ana{k} in hall {n * sentences + k} "
                    + "of the old museum by the river and " * 18 + "talked."
                    for k in range(sentences))


def test_ten_thousand_long_texts_hold_no_more_than_the_bounds(empty_cache) -> None:
    """Hostile: 10k distinct texts of ~2 KB (20 MB in all), each read as a member. The
    per-text cache stays within its entries and bytes at every step, the per-sentence
    ones within their entries."""
    for n in range(10_000):
        extractive._version_text(_long_text(n))
        assert extractive._VERSION_TEXTS_HELD[0] <= extractive.VERSION_TEXTS_BYTES
        assert len(extractive._VERSION_TEXTS) <= extractive.VERSION_TEXTS_MAX
    assert len(extractive._VERSION_TEXTS) == extractive.VERSION_TEXTS_MAX
    assert extractive._VERSION_TEXTS_HELD[0] == sum(
        v.size for v in extractive._VERSION_TEXTS.values())
    assert _long_text(9_999) in extractive._VERSION_TEXTS  # the latest stay
    assert _long_text(0) not in extractive._VERSION_TEXTS
    for kept in (extractive._names, extractive._leading_name, extractive._roles_of,
                 extractive._sentence_tells_change):
        assert kept.cache_info().currsize <= 4096  # type: ignore[attr-defined]


def test_the_bytes_bound_holds_against_texts_the_entries_bound_lets_in(
        empty_cache, monkeypatch: pytest.MonkeyPatch) -> None:
    """Texts long enough that the entries bound alone would hold more than the bytes bound:
    the bytes decide, and what the cache counts is what it holds (traced)."""
    monkeypatch.setattr(extractive, "VERSION_TEXTS_BYTES", 1_000_000)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(600):
            extractive._version_text(_long_text(n, sentences=6))
            assert extractive._VERSION_TEXTS_HELD[0] <= 1_000_000
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 50 < len(extractive._VERSION_TEXTS) < 600
    # held: the cache's count; the rest: the per-sentence caches (4,096 sentences each)
    per_sentence = sum(f.cache_info().currsize for f in (  # type: ignore[attr-defined]
        extractive._names, extractive._leading_name, extractive._roles_of,
        extractive._sentence_tells_change)) * 1_500
    assert grown < extractive._VERSION_TEXTS_HELD[0] + per_sentence + 500_000
    assert grown < 600 * 2 * len(_long_text(0, sentences=6))  # not every text kept


def test_a_text_too_big_for_the_cache_is_read_but_not_kept(empty_cache) -> None:
    huge = "Noor works at Arup. " * (extractive.VERSION_TEXTS_BYTES // 60)
    assert tells_newer_version(huge, LET_GO)
    assert huge not in extractive._VERSION_TEXTS


# --- the clustering: read for a change inside the run, only what would found a cluster ----


def test_an_episode_that_joins_by_similarity_is_not_read_for_a_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read = []
    monkeypatch.setattr(service, "tells_change", lambda text: read.append(text) or False)
    rt = FakeRuntime(tmp_path, ClusteringSettings())
    out = index(rt, ("ep_20260302_0001", JOB, T0, JOB_VEC),
                ("ep_20260302_0002", "Noor works at Arup, in the London office.",
                 T0 + timedelta(hours=1), at(0.95)))
    assert out == {"ep_20260302_0001": "new", "ep_20260302_0002": "join"}
    # neither: the one that joins is never read, and the one that founds a cluster has no
    # cluster near enough for a version (tests/test_cluster_version_floor.py)
    assert read == []


def test_an_episode_that_tells_a_change_does_not_end_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = []
    real = UserClusters.assign_run
    monkeypatch.setattr(UserClusters, "assign_run",
                        lambda self, vectors, *a, **k: runs.append(len(vectors))
                        or real(self, vectors, *a, **k))
    rt = FakeRuntime(tmp_path, ClusteringSettings())
    out = index(rt, ("ep_20260302_0001", JOB, T0, JOB_VEC),
                ("ep_20260306_0001", LET_GO, T0 + timedelta(days=4), at(0.40)),
                ("ep_20260307_0001", "Noor moved to York.", T0 + timedelta(days=5),
                 at(0.3, axis=3)))
    assert out["ep_20260306_0001"] == "version"
    assert runs == [3]


FACTS = [JOB, "Noor lives in Leeds.", "Noor drives a Golf.", "Bea works at the bakery.",
         "Noor plays chess on Sundays."]
CHANGES = [LET_GO, "Noor moved to York.", "Noor sold the Golf.", "Bea quit her job.",
           "Noor quit chess.", "She was let go.", "Noor booked flights to Rome."]


def _stream(seed: int) -> list[tuple[str, str, object, np.ndarray]]:
    """Facts near one of five axes and changes at cosines 0.2-0.6 to one, over three weeks:
    joins, version joins and new clusters, in one order."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(48):
        axis = int(rng.integers(0, 5))
        change = rng.random() < 0.4
        text = CHANGES[int(rng.integers(len(CHANGES)))] if change else FACTS[axis]
        cos = rng.uniform(0.2, 0.6) if change else rng.uniform(0.7, 1.0)
        v = rng.normal(0, 1, DIM).astype(np.float32)
        v[axis] = 0.0
        v = v / np.linalg.norm(v) * np.sqrt(1 - cos * cos)
        v[axis] = cos
        when = T0 + timedelta(seconds=int(rng.integers(0, 21 * 86400)))
        rows.append((when, text, v))
    rows.sort(key=lambda r: r[0])
    return [(f"ep_{w:%Y%m%d}_{n:04d}", text, w, v) for n, (w, text, v) in enumerate(rows)]


@pytest.mark.parametrize("seed", range(4))
def test_runs_with_version_joins_place_as_assign_one_by_one_and_as_recluster(
        tmp_path: Path, seed: int) -> None:
    rows = _stream(seed)
    together = FakeRuntime(tmp_path / "run", ClusteringSettings())
    out = index(together, *rows)  # one call: runs, read for a change inside them
    assert "version" in out.values()
    one = FakeRuntime(tmp_path / "one", ClusteringSettings())
    store_rows(one, [episode(i, text, w) for i, text, w, _ in rows], [r[3] for r in rows])
    svc = ClusterService(one)
    alone = {i: svc.assign(REF, i, v, w).reason for i, _, w, v in rows}  # no run at all
    assert alone == out
    assert snapshot(one) == snapshot(together)
    ClusterService(together).recluster(REF)
    rebuilt = snapshot(together)
    assert rebuilt[0] == snapshot(one)[0]
    assert [m[:3] for m in rebuilt[1]] == [m[:3] for m in snapshot(one)[1]]


def test_the_version_join_reads_queued_members_without_writing_the_queue(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Within one transaction the members placed so far are queued; the look-up reads them
    from the queue (their texts by id) instead of writing the queue first: one write of
    the batch's rows at the end, not one per look-up."""
    flushes = []
    real = service._Write.flush
    monkeypatch.setattr(service._Write, "flush",
                        lambda self: flushes.append(len(self._members.get(REF, ())))
                        or real(self))
    rt = FakeRuntime(tmp_path, ClusteringSettings())
    rows = [("ep_20260302_0001", JOB, T0, JOB_VEC),
            ("ep_20260306_0001", LET_GO, T0 + timedelta(days=4), at(0.40))]
    entries = [episode(i, text, w) for i, text, w, _ in rows]
    store_rows(rt, entries, [r[3] for r in rows])
    svc = ClusterService(rt)
    with svc.batch():  # two calls, as two indexed files: the job is queued, not written
        first = svc.on_entries_indexed(REF, entries[:1], {rows[0][0]: rows[0][3]})
        second = svc.on_entries_indexed(REF, entries[1:], {rows[1][0]: rows[1][3]})
    assert first == {"ep_20260302_0001": "new"}
    assert second == {"ep_20260306_0001": "version"}
    assert [n for n in flushes if n] == [2]  # both member rows, once, at the end


def test_a_queued_narrative_is_no_partner_of_a_change(tmp_path: Path) -> None:
    """A narrative (``parent_type: cluster``) attached in the same transaction is never the
    earlier side of a version, whether the look-up finds it written or queued."""
    rt = FakeRuntime(tmp_path, ClusteringSettings())
    index(rt, ("ep_20260302_0001", "Noor plays chess on Sundays.", T0, JOB_VEC))
    (cluster,) = ClusterService(rt).clusters(REF)
    narrative = episode("ep_20260303_0001", JOB, T0 + timedelta(days=1),
                        parent_type="cluster", parent_id=cluster.cluster_id)
    let_go = episode("ep_20260306_0001", LET_GO, T0 + timedelta(days=4))
    store_rows(rt, [narrative, let_go], [JOB_VEC, at(0.40)])
    svc = ClusterService(rt)
    with svc.batch():
        svc.on_entries_indexed(REF, [narrative], {narrative.id: JOB_VEC})
        out = svc.on_entries_indexed(REF, [let_go], {let_go.id: at(0.40)})
    assert out == {"ep_20260306_0001": "new"}


@pytest.mark.parametrize("size", [1, 2, 4, 8, 16, 32, 64])
def test_queued_members_texts_are_read_by_id_not_by_a_scan_of_the_user(
        tmp_path: Path, size: int) -> None:
    """SQLite picks the (user, kind) index for ``id IN (...) AND kind=...`` from four ids
    on: every Episode of the user read for a few (one owner ×20: ~170 CPU-µs a look-up)."""
    conn = FakeRuntime(tmp_path, ClusteringSettings()).db()
    plan = " ".join(r[3] for r in conn.execute(
        "EXPLAIN QUERY PLAN " + service._LIVE_TEXTS_IN[size], ("a", "p", "u", *["x"] * size)))
    assert "sqlite_autoindex_entries_1" in plan and "entries_by_user_kind" not in plan


def test_a_sentence_without_a_change_word_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Of a text that tells a change, only the sentences the word gate lets through are
    parsed (~100 CPU-µs each): "Noor likes tea." holds no word of a change."""
    extractive._sentence_tells_change.cache_clear()  # type: ignore[attr-defined]
    parsed = []
    real = extractive._reading.__wrapped__
    monkeypatch.setattr(extractive, "_reading", lambda text: parsed.append(text) or real(text))
    text = "Noor likes green tea with honey. Noor was let go. Noor went home early by bus."
    assert tells_change(text)
    assert parsed == ["Noor was let go."]
