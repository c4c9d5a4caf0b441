"""search(): vector, keyword and hybrid (RRF) modes, filters and deprecation handling."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import EverosError, InvalidId
from everos_reflect.index import search as search_module
from everos_reflect.index.search import SearchHit, rrf_fuse, search
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

ANDREW = UserRef.of("u_andrew")
BETTY = UserRef.of("u_betty")
ACME = UserRef("acme", "crm", "u_andrew")


def put(rt: Runtime, ref: UserRef, entry_id: str, subject: str, text: str, **extra: Any) -> None:
    row = {
        "id": entry_id,
        "app_id": ref.app,
        "project_id": ref.project,
        "user_id": ref.user_id,
        "ts": 1_760_000_000.0,
        "timestamp": "2025-10-09T08:53:20+00:00",
        "subject": subject,
        "text": text,
        "parent_type": "memcell",
        "parent_id": "mc_" + entry_id,
        "session_id": "sess_1",
        "embed_model": rt.embedder.name,
        "vector": rt.embedder.embed([f"{subject}\n{text}"])[0],
    }
    row.update(extra)
    kind = Kind.ATOMIC_FACT if entry_id.startswith("af") else Kind.EPISODE
    rt.vectors.upsert(kind, [row])


@pytest.fixture
def rt(tmp_path: Path) -> Runtime:
    runtime = Runtime(tmp_path, Settings(), embedder=HashEmbedder(64))
    put(runtime, ANDREW, "ep_20250101_0001", "New pet", "Andrew adopted a dog named Toby")
    put(runtime, ANDREW, "ep_20250102_0001", "Taxes", "Andrew filed his tax return late")
    put(runtime, ANDREW, "ep_20250103_0001", "Walks", "Toby loves long walks in the park")
    put(runtime, BETTY, "ep_20250101_0001", "New pet", "Betty adopted a dog named Rex")
    put(runtime, ACME, "ep_20250101_0001", "Work dog", "The office adopted a dog mascot")
    return runtime


def ids(hits: list[SearchHit]) -> list[str]:
    return [h.id for h in hits]


def test_vector_mode_ranks_by_similarity_with_scores_in_unit_range(rt: Runtime) -> None:
    hits = search(rt, "adopted a dog named Toby", mode="vector", user_id="u_andrew", top_k=3)
    assert hits[0].id == "ep_20250101_0001"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(0.0 <= h.score <= 1.0 for h in hits)


def test_keyword_mode_matches_words_only(rt: Runtime) -> None:
    hits = search(rt, "tax", mode="keyword", user_id="u_andrew")
    assert ids(hits) == ["ep_20250102_0001"]
    assert 0.0 < hits[0].score < 1.0
    assert search(rt, "zebra", mode="keyword") == []


def test_hybrid_puts_entries_found_by_both_first(rt: Runtime) -> None:
    hits = search(rt, "Toby", mode="hybrid", user_id="u_andrew", app_id="default_app", top_k=3)
    # both Toby entries match by keyword and vector; the tax entry only by vector (the acme
    # app's u_andrew entry ties with it at cosine 0 and comes first by tenant: filtered out)
    assert set(ids(hits[:2])) == {"ep_20250101_0001", "ep_20250103_0001"}
    assert ids(hits)[2] == "ep_20250102_0001"
    assert hits[0].score <= 1.0
    assert hits[2].score < hits[1].score


def test_default_mode_comes_from_settings(rt: Runtime) -> None:
    rt.settings = replace(rt.settings, index=replace(rt.settings.index, search_mode="keyword"))
    assert search(rt, "zebra") == []  # a vector search would always return something
    rt.settings = replace(rt.settings, index=replace(rt.settings.index, search_mode="vector"))
    assert len(search(rt, "zebra")) == 5


def test_filters_by_user_and_tenant(rt: Runtime) -> None:
    everyone = search(rt, "adopted dog", mode="keyword", top_k=10)
    assert {(h.app_id, h.user_id) for h in everyone} == {
        ("default_app", "u_andrew"),
        ("default_app", "u_betty"),
        ("acme", "u_andrew"),
    }
    betty = search(rt, "adopted dog", user_id="u_betty", top_k=10)
    assert {h.user_id for h in betty} == {"u_betty"}
    acme = search(rt, "adopted dog", app_id="acme", project_id="crm", top_k=10)
    assert [(h.app_id, h.project_id, h.subject) for h in acme] == [("acme", "crm", "Work dog")]
    with pytest.raises(InvalidId):
        search(rt, "dog", user_id="u' OR '1'='1")


def test_deprecated_entries_hidden_unless_asked(rt: Runtime) -> None:
    merged = "ep_20250110_0001"
    put(
        rt,
        ANDREW,
        merged,
        "Pet journey",
        "Andrew adopted Toby, a dog; Toby loves walks",
        parent_type="cluster",
        parent_id="cl_abc",
        session_id=None,
        sources=["ep_20250101_0001", "ep_20250103_0001"],
    )
    rt.vectors.set_deprecated(
        Kind.EPISODE, ANDREW, ["ep_20250101_0001", "ep_20250103_0001"], merged
    )

    mine = {"user_id": "u_andrew", "app_id": "default_app"}  # acme has a u_andrew too
    live = search(rt, "Toby dog", top_k=5, **mine)
    assert "ep_20250101_0001" not in ids(live)
    assert "ep_20250103_0001" not in ids(live)
    top = live[0]
    assert top.id == merged
    assert top.session_id is None
    assert top.sources == ["ep_20250101_0001", "ep_20250103_0001"]
    assert (top.parent_type, top.parent_id) == ("cluster", "cl_abc")

    everything = search(rt, "Toby dog", top_k=5, include_deprecated=True, **mine)
    old = {h.id: h.deprecated_by for h in everything}
    assert old["ep_20250101_0001"] == merged
    assert old["ep_20250103_0001"] == merged


def test_hit_to_dict_has_the_api_fields(rt: Runtime) -> None:
    (hit,) = search(rt, "tax return", mode="keyword", user_id="u_andrew")
    data = hit.to_dict()
    assert data == {
        "id": "ep_20250102_0001",
        "subject": "Taxes",
        "episode": "Andrew filed his tax return late",
        "session_id": "sess_1",
        "timestamp": "2025-10-09T08:53:20+00:00",
        "parent_type": "memcell",
        "parent_id": "mc_ep_20250102_0001",
        "score": hit.score,
        "user_id": "u_andrew",
        "app_id": "default_app",
        "project_id": "default_project",
        "deprecated_by": None,
        "sources": [],
        "snippet": "Andrew filed his tax return late",
        "snippet_date": "2025-10-09",
        "kind": "episode",
        "status": None,
        "passages": [],
        "passage": 0,
    }


def test_kind_selects_the_table(rt: Runtime) -> None:
    put(rt, ANDREW, "af_20250101_0001", "", "Andrew owns a dog named Toby")
    facts = search(rt, "Toby", kind=Kind.ATOMIC_FACT, mode="keyword")
    assert ids(facts) == ["af_20250101_0001"]
    assert "af_20250101_0001" not in ids(search(rt, "Toby", mode="keyword", top_k=10))


def test_searching_several_kinds_embeds_the_query_once(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(rt, ANDREW, "af_20250101_0001", "", "Andrew owns a dog named Toby")
    calls: list[list[str]] = []
    embed = rt.embedder.embed

    def counting(texts: list[str]) -> Any:
        calls.append(list(texts))
        return embed(texts)

    monkeypatch.setattr(rt.embedder, "embed", counting)
    hits = search(rt, "Toby", kinds=[Kind.EPISODE, Kind.ATOMIC_FACT], mode="hybrid", top_k=10)
    assert {h.kind for h in hits} == {"episode", "atomic_fact"}
    assert calls == [["Toby"]]


def test_keyword_mode_does_not_embed_the_query(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(texts: list[str]) -> Any:
        raise AssertionError(f"embedded {texts!r}")

    monkeypatch.setattr(rt.embedder, "embed", refuse)
    assert set(ids(search(rt, "Toby", mode="keyword"))) == {"ep_20250101_0001",
                                                            "ep_20250103_0001"}


def test_plain_order_can_be_asked_for_instead_of_latest_first(rt: Runtime) -> None:
    # two versions of one state (cosine ~0.95): the older one is exactly the query's vector
    older = rt.embedder.embed(["Andrew red car"])[0]
    nudge = np.random.default_rng(0).normal(size=older.shape).astype(np.float32)
    newer = older + 0.3 * nudge / np.linalg.norm(nudge)
    newer /= np.linalg.norm(newer)
    put(rt, ANDREW, "ep_20250105_0001", "Car", "Andrew drives a red car", vector=older)
    put(rt, ANDREW, "ep_20250205_0001", "Car", "Andrew now drives a blue car", vector=newer,
        ts=1_762_000_000.0, timestamp="2025-11-01T08:53:20+00:00")
    plain = search(rt, "Andrew red car", mode="vector", top_k=2, latest_first_order=False)
    shipped = search(rt, "Andrew red car", mode="vector", top_k=2)
    assert ids(plain) == ["ep_20250105_0001", "ep_20250205_0001"]
    assert ids(shipped) == ["ep_20250205_0001", "ep_20250105_0001"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": "  "}, "query: must not be empty"),
        # a query that shows nothing (a zero-width space, a BOM) ranked every entry against
        # an invisible character and answered with whatever came first
        ({"query": "\u200b"}, "query: must not be empty"),
        ({"query": " \ufeff\u2060 "}, "query: must not be empty"),
        ({"query": "x", "top_k": 0}, "top_k: must be a whole number from 1 to 100, got 0"),
        ({"query": "x", "top_k": True}, "top_k: must be an integer, got a boolean: true"),
        ({"query": "x", "mode": "fuzzy"}, "mode: must be one of: hybrid, vector, keyword; got "
                                          "'fuzzy'"),
        ({"query": "x", "kind": "note"}, "kind: must be one of: episode, .*; got 'note'"),
        # the API and MCP stopped a query at 10,000 characters; `everos-reflect search` took any
        ({"query": "z" * 10_001}, "query: must be at most 10,000 characters, got 10,001"),
    ],
)
def test_bad_arguments_raise_clear_errors(
    rt: Runtime, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(EverosError, match=message):
        search(rt, **kwargs)


def _row(entry_id: str) -> dict[str, Any]:
    return {"id": entry_id, "app_id": "a", "project_id": "p", "user_id": "u"}


def test_rrf_fuse_rewards_agreement_and_normalises_to_one() -> None:
    by_vector = [_row("x"), _row("y"), _row("z")]
    by_text = [_row("x"), _row("z")]
    fused = rrf_fuse([by_vector, by_text], top_k=3)
    assert [r["id"] for r, _ in fused] == ["x", "z", "y"]
    assert fused[0][1] == pytest.approx(1.0)
    # z: 1/63 + 1/62 beats y: 1/62 alone
    assert fused[1][1] == pytest.approx((1 / 63 + 1 / 62) / (2 / 61))
    assert fused[2][1] == pytest.approx((1 / 62) / (2 / 61))


def test_rrf_fuse_breaks_ties_by_first_appearance_and_cuts_at_top_k() -> None:
    fused = rrf_fuse([[_row("a")], [_row("b")]], top_k=1)
    assert [r["id"] for r, _ in fused] == ["a"]
    assert fused[0][1] == pytest.approx(0.5)


LONG = ("Andrew spent the spring repainting the kitchen and fixing the garden fence. "
        "His sister visited twice and they cooked a large family dinner together. "
        "Work was busy with the quarterly audit and two new hires on the team. "
        "In May he finally went sailing on the Tagus with an old school friend.")


def _narrative_with_facts(rt: Runtime, *, deprecated: str | None = None) -> None:
    put(rt, ANDREW, "ep_20250601_0001", "Spring", LONG, deprecated_by=deprecated)
    for n, fact in enumerate(["Andrew repainted the kitchen", "Andrew's sister visited twice",
                              "Andrew went sailing on the Tagus in May"], start=1):
        put(rt, ANDREW, f"af_20250601_000{n}", "", fact, parent_type="episode",
            parent_id="ep_20250601_0001", deprecated_by=deprecated)


def test_hybrid_ranks_a_long_entry_by_its_best_matching_fact(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    _narrative_with_facts(rt)
    put(rt, ANDREW, "ep_20250501_0001", "Boats", "Andrew went to the boat show in May")
    put(rt, ANDREW, "ep_20250502_0001", "Lisbon", "Andrew went to Lisbon in May on the train")
    query = "Andrew went sailing in May"
    hybrid = ids(search(rt, query, mode="hybrid", user_id="u_andrew", top_k=4))
    with monkeypatch.context() as patch:  # the same search without the by-passage ranking
        patch.setattr(search_module, "_by_passage", lambda *a, **k: [])
        two_lists = ids(search(rt, query, mode="hybrid", user_id="u_andrew", top_k=4))
    # the whole text's single vector dilutes the one paragraph that answers; its fact does not
    assert two_lists.index("ep_20250601_0001") == 2
    # lifted above Lisbon by its fact. Boats, first by vector and by keyword, stays first: it
    # has no facts, so its own text is its passage, second only to the narrative's fact
    assert hybrid[:3] == ["ep_20250501_0001", "ep_20250601_0001", "ep_20250502_0001"]
    assert not any(i.startswith("af_") for i in hybrid)  # facts point at Episodes, never listed


def test_hybrid_finds_an_episode_without_facts_by_its_own_words(rt: Runtime) -> None:
    # Only merges write atomic facts, so every added Episode has none until a Reflection run.
    # The by-passage ranking left them out: first by vector and by keyword (2/61) they lost
    # to any narrative with facts ranked lower by both but first by a fact (3/65).
    for n, topic in enumerate(["a dog", "a cat", "a parrot"], start=1):
        entry = f"ep_2025060{n}_0001"
        put(rt, ANDREW, entry, "Pets", f"Andrew adopted {topic} named Toby. " + LONG)
        put(rt, ANDREW, f"af_2025060{n}_0001", "", f"Andrew adopted {topic} named Toby",
            parent_type="episode", parent_id=entry)
    query = "Andrew adopted a dog named Toby"
    hits = search(rt, query, mode="hybrid", user_id="u_andrew", top_k=3,
                  passages_per_entry=1)
    assert hits[0].id == "ep_20250101_0001"  # the fact-less one (the fixture's), word for word
    assert hits[0].passages == []  # it has no facts to report
    assert hits[0].snippet == "Andrew adopted a dog named Toby"  # snipped from its own text
    assert hits[1].id == "ep_20250601_0001" and hits[1].passages  # narratives still by fact


def test_an_episode_whose_facts_are_all_far_off_is_not_ranked_by_its_whole_text(
        rt: Runtime) -> None:
    # "No fact among the nearest" is not "no facts": a narrative whose facts all lie beyond
    # the fact search's depth keeps out of the by-passage ranking, as it always did.
    rows = search_module._passage_order(
        rt.vectors, [], {}, rt.vectors.search_vector(
            Kind.EPISODE, rt.embedder.embed(["Andrew adopted a dog"])[0], k=10),
        where=None)
    assert (ANDREW.app, ANDREW.project, "u_andrew", "ep_20250101_0001") in rows
    put(rt, ANDREW, "af_20250101_0001", "", "Toby is brown", parent_type="episode",
        parent_id="ep_20250101_0001")
    rows = search_module._passage_order(
        rt.vectors, [], {}, rt.vectors.search_vector(
            Kind.EPISODE, rt.embedder.embed(["Andrew adopted a dog"])[0], k=10),
        where=None)
    assert (ANDREW.app, ANDREW.project, "u_andrew", "ep_20250101_0001") not in rows
    assert (ANDREW.app, ANDREW.project, "u_andrew", "ep_20250102_0001") in rows


def test_hybrid_hits_report_their_nearest_facts_and_snip_from_them(rt: Runtime) -> None:
    _narrative_with_facts(rt)
    [hit] = search(rt, "Andrew went sailing in May", mode="hybrid", user_id="u_andrew",
                   top_k=1)
    assert hit.id == "ep_20250601_0001"
    assert hit.passages[0] == "Andrew went sailing on the Tagus in May"
    assert len(hit.passages) <= search_module.PASSAGES_PER_HIT
    assert "sailing on the Tagus" in hit.snippet
    # vector and keyword searches run no fact query: no passages
    assert all(h.passages == [] for h in search(rt, "sailing", mode="vector", top_k=3))


def test_facts_never_bring_back_an_archived_entry(rt: Runtime) -> None:
    _narrative_with_facts(rt, deprecated="ep_20250701_0001")
    hits = search(rt, "sailing on the Tagus in May", mode="hybrid", user_id="u_andrew")
    assert "ep_20250601_0001" not in ids(hits)
    shown = search(rt, "sailing on the Tagus in May", mode="hybrid", user_id="u_andrew",
                   include_deprecated=True)
    assert "ep_20250601_0001" in ids(shown)


def test_derived_hits_of_one_log_are_read_with_one_parse(root: Path, monkeypatch: Any) -> None:
    # Each derived hit's status was read with a parse of its whole log: 100 insights of one
    # day (a 1.4 MB log) took 5 s per search, the log parsed once per hit.
    from collections import Counter
    from datetime import date

    from everos_reflect.index.sync import Indexer

    ref = UserRef.of("u_ins")
    rt = Runtime(root, embedder=HashEmbedder(32))
    try:
        rt.store.append_many(ref, Kind.INSIGHT, [
            ({"timestamp": "2026-09-01T09:00:00+00:00", "evidence": [], "depth": 1,
              "status": "stale" if n % 10 == 0 else "active"},
             {"Insight": f"Insight {n}: billing deploys fail on Mondays."}) for n in range(60)],
            day=date(2026, 9, 1))
        Indexer(rt).scan()
        reads: Counter[Path] = Counter()
        read = rt.store.read

        def counted(path: Path) -> Any:
            reads[Path(path)] += 1
            return read(path)

        monkeypatch.setattr(rt.store, "read", counted)
        hits = search(rt, "billing deploys Mondays", top_k=100, user_id=ref.user_id,
                      kinds=["insight"], mode="keyword")
    finally:
        rt.close()
    assert len(hits) == 54 and {h.status for h in hits} == {"active"}
    assert list(reads.values()) == [1]


def test_a_status_written_in_capitals_is_read_as_the_briefing_reads_it(root: Path) -> None:
    # `status: Active` (a person's hand) was left out of a search as not active, while the
    # briefing, lessons and provenance read it in any case and served it; `STALE` stays out
    from datetime import date

    from everos_reflect.index.sync import Indexer

    ref = UserRef.of("ada")
    rt = Runtime(root, embedder=HashEmbedder(32))
    try:
        rt.store.append_many(ref, Kind.INSIGHT, [
            ({"timestamp": "2026-09-01T09:00:00+00:00", "evidence": [], "depth": 1,
              "status": status}, {"Insight": f"Billing deploys fail on Mondays, {status}."})
            for status in ("Active", " ACTIVE ", "STALE")], day=date(2026, 9, 1))
        Indexer(rt).scan()
        hits = search(rt, "billing deploys Mondays", top_k=10, user_id=ref.user_id,
                      kinds=["insight"], mode="keyword")
        every = search(rt, "billing deploys Mondays", top_k=10, user_id=ref.user_id,
                       kinds=["insight"], mode="keyword", include_stale=True)
    finally:
        rt.close()
    assert sorted(h.status for h in hits) == ["active", "active"]
    assert sorted(h.status for h in every) == ["active", "active", "stale"]
