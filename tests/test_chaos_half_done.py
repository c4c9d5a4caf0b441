"""bench/chaos_reader.half_done: what the chaos copy op counts against a copy the run left half
done. It counted a live narrative beside a live source alone; a copy spanning several writes of
a commit shows a source archived toward a narrative the copy does not hold, or a merge's fact
live of one, which it passed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import chaos_reader
from chaos_reader import Entry, User


def test_half_done_names_a_missing_narrative_and_its_orphan_facts() -> None:
    user = User()
    user.entries["ep_1"] = Entry("ep_1", "episode", {}, "a source", deprecated_by="ep_9")
    user.entries["ep_2"] = Entry("ep_2", "episode", {}, "another source")
    user.entries["af_1"] = Entry("af_1", "atomic_fact", {
        "parent_type": "episode", "parent_id": "ep_9", "reflection": "rj_1"}, "a fact")
    user.links.append(("episodes/x.md", "ep_1", "ep_9"))
    found = chaos_reader.half_done("u", user)
    assert found == ["u: ep_1 archived toward missing ep_9",
                     "u: fact af_1 live, of missing narrative ep_9"]


def test_half_done_passes_a_finished_copy_and_an_undone_merge() -> None:
    user = User()
    user.entries["ep_9"] = Entry("ep_9", "episode", {"parent_type": "cluster",
                                                     "sources": ["ep_1"]}, "narrative")
    user.entries["ep_1"] = Entry("ep_1", "episode", {}, "a source", deprecated_by="ep_9")
    user.entries["af_1"] = Entry("af_1", "atomic_fact", {
        "parent_type": "episode", "parent_id": "ep_9", "reflection": "rj_1"}, "a fact")
    user.entries["ep_3"] = Entry("ep_3", "episode", {}, "undone", deprecated_by="undone")
    user.links += [("episodes/x.md", "ep_1", "ep_9"), ("episodes/y.md", "ep_3", "undone")]
    assert chaos_reader.half_done("u", user) == []
