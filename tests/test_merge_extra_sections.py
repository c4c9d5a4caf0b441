"""A section a person adds to an Episode by hand (``## Notes`` after ``## Content``, as the
example root does) is part of what the Episode says: a merge must carry it into the narrative
instead of archiving it out of live memory with its source (SPEC §3 keeps unknown sections,
SPEC §5 keeps every fact)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from pathlib import Path

from everos_reflect.llm import ExtractiveLLM, ScriptedLLM
from everos_reflect.llm.extractive import split_sentences
from everos_reflect.model import Entry, Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.consolidate import member_of, merge_text
from tests.reflect_fixtures import (
    ANDREW,
    PETS,
    add_episode,
    check_invariants,
    make_runtime,
    run_reflection,
)

NOTE = "Remind Andrew about the vet visit for Toby on October 3."


def _seed_with_note(rt: Runtime) -> list[Entry]:
    (ts0, s0, c0), (ts1, s1, c1), (ts2, s2, c2) = PETS
    return [
        add_episode(rt, ANDREW, ts0, s0, c0),
        rt.store.append(ANDREW, Kind.EPISODE,
                        {"timestamp": ts1, "parent_type": "memcell", "parent_id": "mc_0904",
                         "session_id": "sess_0904"},
                        {"Subject": s1, "Content": c1, "Notes": NOTE},
                        day=date(2026, 9, 4)),
        add_episode(rt, ANDREW, ts2, s2, c2),
    ]


def test_merge_text_appends_extra_sections_under_their_heading() -> None:
    entry = Entry("ep_20260904_0001", Kind.EPISODE, {"owner_id": "u"},
                  {"Subject": "s", "Summary": "short", "Content": "Body.", "Notes": " n \n",
                   "Empty": "  "})
    # Subject and Summary are not merged text; an empty section adds nothing
    assert merge_text(entry) == "Body.\n\nNotes: n"
    plain = Entry("ep_20260904_0002", Kind.EPISODE, {"owner_id": "u"},
                  {"Subject": "s", "Content": "Body."})
    assert merge_text(plain) == "Body."


def test_the_extractive_narrative_keeps_a_hand_written_note(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    sources = _seed_with_note(rt)

    counts = run_reflection(rt)

    assert counts["merged"] == 1
    narrative = next(e for e in rt.store.entries(ANDREW, Kind.EPISODE) if e.sources)
    assert narrative.sources == [e.id for e in sources]
    assert "vet visit for Toby on October 3" in narrative.content
    check_invariants(rt)


def test_the_llm_merge_is_sent_the_note_and_the_guard_requires_it(root: Path) -> None:
    llm = ScriptedLLM(fallback=ExtractiveLLM())
    rt = make_runtime(root, llm)
    sources = _seed_with_note(rt)

    run_reflection(rt)

    [request] = llm.merge_requests
    sent = {m.id: m.content for m in request.members}
    assert sent[sources[1].id].endswith("Notes: " + NOTE)
    assert NOTE not in sent[sources[0].id]
    # a narrative's provenance rows still line up with what is sent of it
    member = member_of(sources[1])
    assert member.provenance is None


def test_a_note_added_to_a_narrative_is_sent_with_its_provenance_rows(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    _seed_with_note(rt)
    run_reflection(rt)
    narrative = next(e for e in rt.store.entries(ANDREW, Kind.EPISODE) if e.sources)
    edited = replace(narrative, sections={**narrative.sections,
                                          "Notes": "Toby is afraid of thunder."})

    member = member_of(edited)

    assert member.provenance is not None
    assert len(member.provenance) == len(split_sentences(member.content))
    # the person's note on the narrative stands for what the narrative stands for
    assert member.provenance[-1] == tuple(narrative.sources)
