"""The belief tiers' pure rules: triggers, cursor windows, slot versions, edge validity."""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime, timedelta
from typing import Any

from everos_reflect.markdown.parser import parse_log
from everos_reflect.strategies.beliefs import (
    Conviction,
    Edge,
    census_due,
    cooldown_over,
    count_due,
    current_worldview,
    derived_depth,
    edge_problem,
    on_write_due,
    plan_versions,
    superseded_edges,
    window,
    window_key,
)

T0 = datetime(2026, 10, 12, 9, 0, tzinfo=UTC)


def conv(cid: str, key: str, text: str, *, minutes: int = 0, live: bool = True) -> Conviction:
    return Conviction(cid, key, text, ("in_20261012_0001", "in_20261012_0002"), 2,
                      T0 + timedelta(minutes=minutes), live)


# -- triggers ----------------------------------------------------------


def test_count_trigger_fires_at_three_new_insights_and_not_before() -> None:
    assert [count_due(n, 3) for n in range(5)] == [False, False, False, True, True]


def test_on_write_trigger_fires_on_any_changed_conviction() -> None:
    assert not on_write_due(0)
    assert on_write_due(1)


def test_census_needs_two_standing_edges_and_a_new_one() -> None:
    assert not census_due(new_edges=1, standing=1, threshold=2)
    assert census_due(new_edges=1, standing=2, threshold=2)
    # two old edges and nothing new: a census is not re-fired on every poll
    assert not census_due(new_edges=0, standing=2, threshold=2)


def test_cooldown_blocks_until_it_has_passed() -> None:
    cool = timedelta(seconds=120)
    assert cooldown_over(None, T0, cool)
    assert not cooldown_over(T0, T0 + timedelta(seconds=119), cool)
    assert cooldown_over(T0, T0 + timedelta(seconds=120), cool)
    assert cooldown_over(T0, T0 - timedelta(minutes=59), cool)  # the clock went back past it


# -- the changes cursor ----------------------------------------------------------


def test_window_is_what_was_not_consumed_in_that_text() -> None:
    candidates = {"in_20261012_0001": "h1", "in_20261012_0002": "h2", "in_20261012_0003": "h3"}
    consumed = [("in_20261012_0001", "h1"), ("in_20261012_0002", "old")]
    # 0002 was consumed with another text: a hand edit makes it new again
    assert window(candidates, consumed) == ["in_20261012_0002", "in_20261012_0003"]
    assert window(candidates, [*consumed, ("in_20261012_0002", "h2"),
                               ("in_20261012_0003", "h3")]) == []


def test_window_key_is_stable_and_names_the_exact_window() -> None:
    a = window_key("update_worldview", "u", {"in_1": "h1", "in_2": "h2"})
    assert a == window_key("update_worldview", "u", {"in_2": "h2", "in_1": "h1"})
    assert a != window_key("update_worldview", "u", {"in_1": "h1", "in_2": "changed"})
    assert a != window_key("update_worldview", "other", {"in_1": "h1", "in_2": "h2"})
    assert a.startswith("dw_")


# -- slot versioning ----------------------------------------------------------


def test_one_live_conviction_per_key_newest_wins_and_the_rest_are_repairs() -> None:
    view = current_worldview([
        conv("wv_20261012_0001", "strategy", "A", minutes=0),
        conv("wv_20261012_0002", "strategy", "B", minutes=5),
        conv("wv_20261012_0003", "commitments", "C"),
        conv("wv_20261012_0004", "risks", "old", live=False),
    ])
    assert {k: c.id for k, c in view.current.items()} == {
        "strategy": "wv_20261012_0002", "commitments": "wv_20261012_0003"}
    assert view.repairs == {"wv_20261012_0001": "wv_20261012_0002"}


def test_an_unshifted_slot_gets_no_new_version() -> None:
    current = {"strategy": conv("wv_20261012_0001", "strategy", "Ship fast.")}
    plan = plan_versions(current, [
        {"key": "strategy", "text": "  ship   FAST ", "evidence": ["in_1", "in_2"]},
    ], ["strategy", "commitments"])
    assert plan.new == []
    assert plan.unchanged == ["strategy"]


def test_a_shifted_slot_archives_only_its_own_previous_version() -> None:
    current = {
        "strategy": conv("wv_20261012_0001", "strategy", "Enterprise first."),
        "commitments": conv("wv_20261012_0002", "commitments", "Deliver SSO to Meridian."),
    }
    plan = plan_versions(current, [
        {"key": "strategy", "text": "Redirect engineering to self-serve.",
         "evidence": ["in_3", "in_4"]},
    ], ["strategy", "commitments"])
    assert [(v.key, v.supersedes) for v in plan.new] == [("strategy", "wv_20261012_0001")]
    # the commitment is untouched: a new strategy never archives another key's version
    assert all(v.supersedes != "wv_20261012_0002" for v in plan.new)


def test_new_key_unknown_key_and_duplicate_key() -> None:
    plan = plan_versions({}, [
        {"key": "commitments", "text": "Deliver SSO.", "evidence": ["in_1"]},
        {"key": "commitments", "text": "Something else.", "evidence": ["in_2"]},
        {"key": "mood", "text": "Happy.", "evidence": ["in_1"]},
    ], ["commitments", "strategy"])
    assert [(v.key, v.text, v.supersedes) for v in plan.new] == [
        ("commitments", "Deliver SSO.", None)]
    assert len(plan.refused) == 2
    assert "twice" in plan.refused[0] and "'mood'" in plan.refused[1]


def test_depth_is_one_more_than_the_deepest_cited_record() -> None:
    assert derived_depth([]) == 1
    assert derived_depth([0, 0]) == 1
    assert derived_depth([1, 2]) == 3


# -- edges ----------------------------------------------------------

A, B, C = "wv_20261012_0001", "wv_20261012_0002", "wv_20261012_0003"


def test_an_edge_needs_two_live_convictions_one_just_changed() -> None:
    assert edge_problem([A, B], live=[A, B], changed=[B]) is None
    assert "not a live" in edge_problem([A, C], live=[A, B], changed=[A])
    assert "neither" in edge_problem([A, B], live=[A, B], changed=[C])
    assert "exactly two" in edge_problem([A, A], live=[A], changed=[A])
    assert "exactly two" in edge_problem([A, B, C], live=[A, B, C], changed=[A])
    assert "not a conviction" in edge_problem([A, "in_20261012_0001"], live=[A], changed=[A])


class Lookups(AbstractSet[Any]):
    """A set that counts how often it is walked whole (copied, intersected) rather than
    looked up."""

    def __init__(self, items: Any) -> None:
        self.items, self.walks = set(items), 0

    def __contains__(self, item: object) -> bool:
        return item in self.items

    def __iter__(self) -> Iterator[Any]:
        self.walks += 1
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def test_checking_a_long_reply_looks_the_sets_up_without_copying_them() -> None:
    # one copy of every set per reply item made a reply of n items against n convictions
    # cost n² (~33 s for 500,000 items against 1,000 convictions)
    convictions = [f"wv_20261012_{n:04d}" for n in range(1, 1001)]
    live, changed = Lookups(convictions), Lookups(convictions[:10])
    standing = Lookups({frozenset(convictions[:2])})
    problems = [edge_problem([convictions[i % 1000], convictions[(i + 1) % 1000]], live=live,
                             changed=changed, standing_pairs=standing) for i in range(5000)]
    assert (live.walks, changed.walks, standing.walks) == (0, 0, 0)
    assert problems[0] == f"{convictions[0]} and {convictions[1]} already have a standing edge"
    assert problems[1] is None and problems[20] is not None  # 20, 21: neither changed


def test_an_edge_is_not_written_twice_for_the_same_pair() -> None:
    assert "already" in edge_problem([B, A], live=[A, B], changed=[A],
                                     standing_pairs=[frozenset({A, B})])


def test_an_edge_whose_conviction_was_superseded_is_resolved_with_the_reason() -> None:
    edges = [Edge("rel_20261012_0001", (A, B), "active"),
             Edge("rel_20261012_0002", (B, C), "active"),
             Edge("rel_20261012_0003", (A, C), "resolved")]
    out = superseded_edges(edges, live=[B, C], successor={A: "wv_20261013_0001"})
    assert out == {"rel_20261012_0001": f"{A} was superseded by wv_20261013_0001"}


def test_beliefs_read_from_markdown_entries() -> None:
    text = (
        "---\ntype: relation_daily\nschema_version: 1\nuser_id: ada\ndate: '2026-10-12'\n---\n"
        "<!-- entry:rel_20261012_0001 -->\n---\nowner_id: ada\n"
        "timestamp: 2026-10-12T09:00:00+00:00\nrelation_type: self_contradiction\n"
        f"between: [{A}, {B}]\nstatus: active\ndepth: 3\n---\n"
        "## Relation\nStopping enterprise work breaks the enterprise commitments.\n"
        "<!-- /entry:rel_20261012_0001 -->\n"
    )
    entry = parse_log(text).entries[0]
    edge = Edge.of(entry)
    assert edge.between == (A, B) and edge.standing
    assert edge.text.startswith("Stopping enterprise")
