"""``undo`` of a narrative a person archived by hand toward something that is no merge
(``deprecated_entries: {narrative: archived}``, or toward an Episode of theirs) refused with "a
later merge built on X: it was folded into archived; undo archived first": a merge that does
not exist, and ``--cascade`` then failed on it. It now says the narrative was archived by hand,
toward what, in which log, and what to do. A real later merge is still named as one."""

from __future__ import annotations

from datetime import date

import pytest

from everos_reflect.model import Entry
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient
from tests.test_undo import REF, invoke, merge, pets, rt, two_merges

__all__ = ["rt"]

pytestmark = pytest.mark.usefixtures("settle_at_once")

LOG = "default_app/default_project/users/u_andrew/episodes/episode-2026-08-20.md"


def archive_by_hand(rt: Runtime, narrative: Entry, toward: str) -> None:
    path = rt.store.path_for_id(REF, narrative.id)
    day = f"date: '{narrative.id[3:7]}-{narrative.id[7:9]}-{narrative.id[9:11]}'\n"
    text = path.read_text("utf-8")
    assert day in text
    path.write_text(text.replace(
        day, f"{day}deprecated_entries: {{{narrative.id}: {toward}}}\n", 1), "utf-8")


@pytest.mark.parametrize(("toward", "what"), [
    ("archived", "'archived', which is no entry id"),
    ("ep_20260810_0001", "ep_20260810_0001, an entry that is no merge (parent_type: memcell)"),
    ("ep_20990101_0001", "ep_20990101_0001, which no entry of user "
                         "default_app/default_project/u_andrew holds"),
], ids=["word", "episode", "no-entry"])
@pytest.mark.parametrize("cascade", [False, True], ids=["plain", "cascade"])
def test_undo_of_a_narrative_archived_by_hand_says_so_and_what_to_do(
        rt: Runtime, toward: str, what: str, cascade: bool) -> None:
    narrative = merge(rt, pets(rt, 2), "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))
    archive_by_hand(rt, narrative, toward)
    before = rt.store.path_for_id(REF, narrative.id).read_bytes()

    result = invoke(rt.root, narrative.id, "--user", "u_andrew",
                    *(["--cascade"] if cascade else []))

    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"error: {narrative.id} was archived by hand, not by a later merge: "
        f"deprecated_entries in {LOG} map it to {what}; to undo its merge, remove the key "
        f"{narrative.id} from that frontmatter (it is live again), then undo {narrative.id}")
    assert rt.store.path_for_id(REF, narrative.id).read_bytes() == before


def test_api_undo_of_a_narrative_archived_by_hand_answers_409_saying_so(rt: Runtime) -> None:
    narrative = merge(rt, pets(rt, 2), "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))
    archive_by_hand(rt, narrative, "archived")
    resp = ApiClient(rt)("POST", "/api/v1/ome/undo",
                         json={"entry_id": narrative.id, "user_id": "u_andrew"})
    assert resp.status_code == 409, resp.text
    assert f"{narrative.id} was archived by hand, not by a later merge" in resp.text


def test_undo_of_a_narrative_a_later_merge_folded_in_still_names_that_merge(
        rt: Runtime) -> None:
    _, n1, n2 = two_merges(rt)
    result = invoke(rt.root, n1.id, "--user", "u_andrew")
    assert result.exit_code == 1
    assert f"a later merge built on {n1.id}: it was folded into {n2.id}" in result.stderr
