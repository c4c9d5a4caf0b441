"""Sentence-level provenance (stored with a narrative, read back from Markdown) and the search
snippet that serves a caller's word budget."""

from __future__ import annotations

import sys
from pathlib import Path

from everos_reflect.index.search import search
from everos_reflect.index.snippet import dated_sentences, make_snippet
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM, ScriptedLLM
from everos_reflect.llm.extractive import split_sentences
from everos_reflect.model import Kind
from everos_reflect.provenance import PROVENANCE_KEY, provenance, provenance_meta
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, run_reflection

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import budget

NARRATIVE = ("2026-08-10: Andrew has no pets yet. Andrew moved to Portland.\n\n"
             "2026-09-10: Andrew adopted a dog named Toby.\n\n"
             "Current state: Andrew now has two dogs.")


def seed(rt) -> list:
    return [
        add_episode(rt, ANDREW, "2026-08-10T10:00:00+00:00", "Pets",
                    "Andrew has no pets yet. Andrew wants a dog."),
        add_episode(rt, ANDREW, "2026-08-12T10:00:00+00:00", "Pets",
                    "Andrew wants a dog. Andrew has no pets yet!"),
        add_episode(rt, ANDREW, "2026-08-20T10:00:00+00:00", "Pets",
                    "Andrew adopted a dog named Toby, a lab mix."),
    ]


def test_reflection_stores_sentence_provenance_that_reads_back_from_markdown(root: Path) -> None:
    rt = make_runtime(root, ScriptedLLM(fallback=ExtractiveLLM()))
    sources = seed(rt)

    assert run_reflection(rt)["merged"] == 1

    [narrative] = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                   if e.parent_type == "cluster"]
    assert PROVENANCE_KEY in narrative.meta
    p = provenance(narrative)
    assert p.recorded
    assert [s.text for s in p.sentences] == split_sentences(narrative.content)
    by_text = {s.text.split(": ", 1)[-1]: set(s.sources) for s in p.sentences}
    # the restated sentences stand for both Episodes that said them
    assert by_text["Andrew has no pets yet!"] == {sources[0].id, sources[1].id}
    assert by_text["Andrew adopted a dog named Toby, a lab mix."] == {sources[2].id}
    # shorter than its sources: the repeats are gone
    assert len(narrative.content.split()) < sum(len(s.content.split()) for s in sources)
    # a rebuild of the index from Markdown keeps it (the Markdown is the truth)
    Indexer(rt).reindex()
    again = rt.store.get(ANDREW, narrative.id)
    assert provenance(again) == p
    assert p.to_dict()["sentences"][0]["sources"]


def test_a_hand_edited_narrative_falls_back_to_entry_level_sources() -> None:
    from everos_reflect.model import Entry

    rows = [["ep_20260810_0001"], ["ep_20260810_0002"], ["ep_20260910_0001"],
            ["ep_20261010_0001"]]
    meta = {"sources": ["ep_20260810_0001", "ep_20260810_0002", "ep_20260910_0001",
                        "ep_20261010_0001"],
            PROVENANCE_KEY: provenance_meta(NARRATIVE, rows)}
    entry = Entry("ep_20261011_0001", Kind.EPISODE, meta, {"Content": NARRATIVE})
    assert provenance(entry).recorded
    assert provenance(entry).sentences[3].sources == ("ep_20261010_0001",)

    edited = Entry("ep_20261011_0001", Kind.EPISODE, meta,
                   {"Content": NARRATIVE.replace("two dogs", "three dogs")})
    p = provenance(edited)
    assert not p.recorded
    assert all(s.sources == tuple(meta["sources"]) for s in p.sentences)
    # a malformed (hostile) record is ignored the same way
    bad = Entry("ep_20261011_0001", Kind.EPISODE,
                {**meta, PROVENANCE_KEY: {"content": "x", "sentences": 7}},
                {"Content": NARRATIVE})
    assert not provenance(bad).recorded


def test_a_record_too_big_to_read_back_is_left_out_and_the_merge_is_written(
        root: Path) -> None:
    # 40 Episodes repeating the same 100 sentences: each sentence of the narrative credits all
    # 40, a record past the 64 KiB a metadata block may hold. The store refused to write the
    # narrative, the merge stayed "interrupted" and every later run failed to recover it.
    rt = make_runtime(root, ExtractiveLLM())
    text = " ".join(f"Andrew walked Toby along trail number {i} near Denver." for i in range(100))
    sources = [add_episode(rt, ANDREW, f"2026-09-{1 + k % 28:02d}T{10 + k // 28}:00:00+00:00",
                           "Andrew walks Toby", text) for k in range(40)]

    counts = run_reflection(rt)

    assert counts.get("merged") == 1 and not counts.get("interrupted"), counts
    [narrative] = [e for e in rt.store.entries(ANDREW, Kind.EPISODE) if e.sources]
    assert PROVENANCE_KEY not in narrative.meta
    assert sorted(narrative.sources) == sorted(e.id for e in sources)
    # explain credits each sentence to the entry-level sources, as for a hand-edited one
    assert all(s.sources == tuple(narrative.sources) for s in provenance(narrative).sentences)
    assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0


def test_snippet_is_the_answering_passage_with_its_date() -> None:
    snip = make_snippet(NARRATIVE, "when did Andrew adopt Toby", date="2026-10-10")
    assert snip.text.startswith("Andrew adopted a dog named Toby.")
    assert snip.date == "2026-09-10"
    short = make_snippet(NARRATIVE, "when did Andrew adopt Toby", max_words=8)
    assert short.text == "Andrew adopted a dog named Toby."
    # a state question prefers the latest version (the current state comes last)
    state = make_snippet(NARRATIVE, "does Andrew have dogs", date="2026-10-10", max_words=6)
    assert state.text == "Andrew now has two dogs." and state.date == "2026-10-10"
    assert next(t for t, _ in dated_sentences(NARRATIVE, None)) == "Andrew has no pets yet."


def test_an_anchor_fact_picks_the_sentence_a_question_words_differently() -> None:
    text = ("2026-08-10: Andrew moved to Portland. Andrew took up sailing on weekends.\n\n"
            "2026-09-10: Andrew bought a new boat for the lake.")
    # "where does Andrew live" shares only "Andrew" with any sentence: lexically the latest wins
    plain = make_snippet(text, "where does Andrew live", max_words=5)
    assert plain.text == "Andrew bought a new boat for the lake."
    # the nearest fact (found by meaning) points at the answer
    anchored = make_snippet(text, "where does Andrew live", max_words=5,
                            anchors=["Andrew moved to Portland."])
    assert anchored.text == "Andrew moved to Portland."
    assert anchored.date == "2026-08-10"
    # a better-ranked anchor outranks a later one; an anchor matching nothing changes nothing
    both = make_snippet(text, "Andrew", max_words=5,
                        anchors=["Andrew took up sailing on weekends", "Andrew moved to Portland"])
    assert both.text == "Andrew took up sailing on weekends."
    assert make_snippet(text, "where does Andrew live", max_words=5,
                        anchors=["Jess plays the cello"]) == plain


def test_search_hits_carry_a_snippet_next_to_the_full_text(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    add_episode(rt, ANDREW, "2026-08-20T10:00:00+00:00", "Week",
                "Andrew painted the fence. Andrew adopted a dog named Toby. "
                "Andrew cooked a risotto for Jess.")
    Indexer(rt).scan()
    [hit] = search(rt, "dog named Toby", user_id=ANDREW.user_id)
    assert hit.episode.startswith("Andrew painted the fence.")
    assert "Andrew adopted a dog named Toby." in hit.snippet
    assert hit.snippet_date == "2026-08-20"
    assert {"snippet", "snippet_date", "passages"} <= set(hit.to_dict())


def test_budgeted_recall_cuts_the_crossing_item_at_whole_sentences() -> None:
    s = budget.Sentence
    first = [s("one two three", frozenset({"D1:1"}))]
    second = [s("four five", frozenset({"D2:1"})), s("six seven eight", frozenset({"D3:1"}))]
    third = [s("nine", frozenset({"D4:1"}))]
    assert budget.evidence_in(budget.within_budget([first, second, third], 5)) == {"D1:1",
                                                                                   "D2:1"}
    assert budget.evidence_in(budget.within_budget([first, second, third], 4)) == {"D1:1"}
    assert budget.evidence_in(budget.within_budget([first, second, third], 9)) == {
        "D1:1", "D2:1", "D3:1", "D4:1"}
    # one giant item: only what fits is credited
    giant = [first[0], *second, *third]
    assert budget.evidence_in(budget.within_budget([giant], 5)) == {"D1:1", "D2:1"}
    assert budget.recall({"D1:1", "D9:9"}, {"D1:1"}) == 0.5
    obs = {budget.normalise("Andrew adopted Toby."): frozenset({"D5:2"})}
    read = [s("2026-09-10: Andrew adopted Toby.", frozenset())]
    assert budget.observation_evidence(read, obs) == {"D5:2"}


def test_statement_level_credit_is_what_a_sentence_states_within_its_sources() -> None:
    import numpy as np

    s = budget.Sentence
    # three observations of one session (D1) and one of another (D2); unit vectors by hand
    observations = [("Andrew adopted Toby.", frozenset({"D1:1"})),
                    ("Andrew got a dog named Toby.", frozenset({"D1:2"})),
                    ("Andrew likes jazz.", frozenset({"D1:3"})),
                    ("Andrew adopted a cat.", frozenset({"D2:1"}))]
    dog, jazz, cat = np.eye(3, dtype=np.float32)
    vectors = {"andrew adopted toby": dog, "andrew got a dog named toby": dog,
               "andrew likes jazz": jazz, "andrew adopted a cat": cat,
               "toby is andrew's dog": dog, "hello": (dog + jazz) / np.sqrt(2)}
    matrix = np.stack([vectors[budget.normalise(t)] for t, _ in observations])
    stated = budget.StatedEvidence(observations, matrix, vectors.__getitem__, 0.75)
    session = frozenset({"D1:1", "D1:2", "D1:3"})
    # entry-level credit gives a short sentence the whole session; this gives what it states:
    # both restatements of the adoption (one folded into the other), not the jazz
    read = [s("2026-09-10: Toby is Andrew's dog.", session)]
    assert budget.evidence_in(read) == set(session)
    assert stated.evidence(read) == {"D1:1", "D1:2"}
    # a vague sentence states nothing, however short; outside its sources nothing is credited
    assert stated.evidence([s("Hello.", session)]) == set()
    assert stated.evidence([s("Toby is Andrew's dog.", frozenset({"D2:1"}))]) == set()
    # a date line carries no evidence
    assert stated.evidence([s("2026-09-10", frozenset())]) == set()


def test_provenance_command_shows_each_sentence_with_its_sources(root: Path) -> None:
    from click.testing import CliRunner

    from everos_reflect.cli.main import cli

    rt = make_runtime(root, ScriptedLLM(fallback=ExtractiveLLM()))
    sources = seed(rt)
    assert run_reflection(rt)["merged"] == 1
    [narrative] = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                   if e.parent_type == "cluster"]
    runner = CliRunner()
    out = runner.invoke(cli, ["provenance", narrative.id, "--user", ANDREW.user_id,
                              "--root", str(root), "--json"])
    assert out.exit_code == 0, out.output
    data = __import__("json").loads(out.output)
    assert data["recorded"] and data["id"] == narrative.id
    assert {i for s in data["sentences"] for i in s["sources"]} == {e.id for e in sources}
    text = runner.invoke(cli, ["provenance", narrative.id, "--user", ANDREW.user_id,
                               "--root", str(root)])
    assert text.exit_code == 0 and "recorded per sentence" in text.output
    # an Episode as written merged nothing: it was said to have "no valid per-sentence
    # record", every sentence "credited to all sources"
    plain = runner.invoke(cli, ["provenance", sources[0].id, "--user", ANDREW.user_id,
                                "--root", str(root)])
    assert plain.exit_code == 0, plain.output
    assert plain.output.splitlines()[0].endswith(
        "not a merged narrative: it stands for itself)"), plain.output
    missing = runner.invoke(cli, ["provenance", "ep_20200101_0001", "--user", ANDREW.user_id,
                                  "--root", str(root)])
    assert missing.exit_code != 0 and "Traceback" not in missing.output


def test_explain_shows_which_sources_each_narrative_sentence_came_from(root: Path) -> None:
    from click.testing import CliRunner

    from everos_reflect.cli.main import cli
    from everos_reflect.strategies.insight_views import explain

    rt = make_runtime(root, ScriptedLLM(fallback=ExtractiveLLM()))
    sources = seed(rt)
    assert run_reflection(rt)["merged"] == 1
    [narrative] = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                   if e.parent_type == "cluster"]
    tree = explain(rt, ANDREW, narrative.id)
    assert tree["recorded"] is True
    assert tree["sentences"] == provenance(narrative).to_dict()["sentences"]
    by_text = {s["text"].split(": ", 1)[-1]: set(s["sources"]) for s in tree["sentences"]}
    assert by_text["Andrew adopted a dog named Toby, a lab mix."] == {sources[2].id}
    # the tree descends into the sources the sentences cite
    assert {c["id"] for c in tree["evidence"]} == {e.id for e in sources}
    text = CliRunner().invoke(cli, ["explain", narrative.id, "--user", ANDREW.user_id,
                                    "--root", str(root)])
    assert text.exit_code == 0, text.output
    line = next(ln for ln in text.output.splitlines() if "lab mix" in ln and "<-" in ln)
    assert line.rstrip().endswith(sources[2].id)


def test_a_snippet_is_one_passage_not_a_collage_of_far_matches() -> None:
    filler = " ".join(f"Andrew mentioned unrelated topic number {k} that day." for k in range(12))
    text = (f"Andrew adopted a beagle dog named Toby. Toby is a beagle. {filler} "
            "Andrew taught Toby tricks.")
    query = "Toby dog beagle tricks"
    snip = make_snippet(text, query, max_words=30)
    # the far match scores second best, yet does not join the best across the filler;
    # the near one, third best, does
    assert snip.text == "Andrew adopted a beagle dog named Toby. Toby is a beagle."
    assert snip.sentences == (0, 1)
    # with room for everything between, the passage is everything between
    wide = make_snippet(text, query, max_words=200)
    assert wide.sentences == tuple(range(len(dated_sentences(text, None))))
    # nothing matches: the entry's opening, as much of it as fits
    opening = make_snippet(text, "cello recital", max_words=12)
    assert opening.text == "Andrew adopted a beagle dog named Toby. Toby is a beagle."


def test_an_over_long_sentence_is_cut_to_the_snippet_budget() -> None:
    # unpunctuated text is one sentence: a caller's budget still gets max_words of it
    text = " ".join(["Andrew sailed"] + [f"past island {k}" for k in range(2000)])
    snip = make_snippet(text, "where did Andrew sail", max_words=20)
    assert snip.text.endswith(" …")
    assert len(snip.text.split()) == 21 and snip.text.startswith("Andrew sailed past island 0")
    assert snip.sentences == (0,)


def test_a_snippet_never_crosses_from_one_date_to_another() -> None:
    # a topic paragraph: one line per day. The dog questions match both days' lines, but the
    # snippet carries one date, so it takes only the best line's day
    text = ("2026-07-01: Andrew adopted a dog named Toby. Toby is a beagle.\n"
            "2026-07-20: Andrew taught his dog Toby to fetch.\n\n"
            "Current state: Andrew walks Toby daily.")
    snip = make_snippet(text, "what did Andrew teach his dog Toby", date="2026-08-01",
                        max_words=60)
    assert snip.text == "Andrew taught his dog Toby to fetch." and snip.date == "2026-07-20"
    first = make_snippet(text, "which beagle did Andrew adopt", max_words=60)
    assert first.text == "Andrew adopted a dog named Toby. Toby is a beagle."
    assert first.date == "2026-07-01"
    # with nothing matching, the opening stops at the first date change too
    opening = make_snippet(text, "cello recital", max_words=60)
    assert opening.sentences == (0, 1) and opening.date == "2026-07-01"


def test_provenance_command_reads_with_the_roots_limits(root: Path) -> None:
    """It read the log with the shipped limits: an entry a root's raised
    ``max_entry_bytes`` lets the daemon write and index was "not read", so no such entry."""
    from click.testing import CliRunner

    from everos_reflect.cli.main import cli
    from everos_reflect.runtime import Runtime

    (root / "everos.toml").write_text("[limits]\nmax_entry_bytes = 1048576\n")
    rt = Runtime(root)  # the root's settings
    try:
        long = add_episode(rt, ANDREW, "2026-09-07T10:00:00+00:00", "Diary",
                           "Andrew wrote a long diary entry. " * 10_000)
    finally:
        rt.close()
    out = CliRunner().invoke(cli, ["provenance", long.id, "--user", ANDREW.user_id,
                                   "--root", str(root), "--json"])
    assert out.exit_code == 0, out.output
    assert __import__("json").loads(out.output)["id"] == long.id
