"""What a tier consumed (its change cursor) after a user's folder was renamed by hand.

The cursor lives in ``system.db`` and survives a ``reindex``, like the audit. After ``mv
users/u_dev users/u_ops`` and a scan, the audit rows followed the folder (sessions 45–46), the
cursor stayed under u_dev, a user nobody has: every tier read u_ops's whole history as new,
and with a language model would have paid for the same window again.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.index import cursors
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.insights import NAME, ReflectInsights
from tests.reflect_fixtures import add_episode, make_runtime

#: logs moved by the test itself, no other writer (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")

DEV, OPS, QA = UserRef.of("u_dev"), UserRef.of("u_ops"), UserRef.of("u_qa")
SETTINGS = validate_strategy_settings(NAME, {}, "ome.toml")


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = make_runtime(root, ExtractiveLLM())
    yield runtime
    runtime.close()


def users(root: Path) -> Path:
    return root / "default_app" / "default_project" / "users"


def consumed_history(rt: Runtime) -> int:
    """u_dev's history, consumed by one insights run; returns the cursor's rows."""
    for week in range(4):
        add_episode(rt, DEV, f"2026-10-{1 + 7 * week:02d}T09:00:00+00:00", "Deploy retry",
                    "Before retrying the deploy the user asked to see the kubernetes logs.",
                    importance=8)
    for i in range(6):
        add_episode(rt, DEV, f"2026-08-{1 + i:02d}T09:00:00+00:00", f"Standup {i}",
                    f"Daily standup number {i} about the billing dashboard.", importance=8)
    ReflectInsights().run(RunContext(rt, SETTINGS, "run_1", "test", force=True))
    assert window(rt, DEV) == {}
    return len(cursors.rows(rt.db(), NAME, DEV))


def window(rt: Runtime, ref: UserRef) -> dict[str, str]:
    return ReflectInsights().pending(rt, ref, SETTINGS)[1]


@pytest.mark.parametrize("how", ["scan", "reindex"])
def test_a_renamed_folder_takes_what_its_tiers_consumed(rt: Runtime, how: str) -> None:
    rows = consumed_history(rt)
    assert rows >= 10

    shutil.move(users(rt.root) / "u_dev", users(rt.root) / "u_ops")
    if how == "scan":
        Indexer(rt).scan()
    else:
        Indexer(rt).reindex()

    assert window(rt, OPS) == {}  # read as new before: all ten Episodes
    assert len(cursors.rows(rt.db(), NAME, OPS)) == rows
    assert cursors.rows(rt.db(), NAME, DEV) == []
    late = add_episode(rt, OPS, "2026-11-01T09:00:00+00:00", "Late", "A later episode.",
                       importance=3)
    assert list(window(rt, OPS)) == [late.id]  # what is new after the rename still is


def test_the_cursor_follows_whichever_order_the_scan_meets_the_two_folders(rt: Runtime) -> None:
    """The new folder indexed first (its ids then held twice until the old one's rows go),
    then the old one's removal: the cursor follows at the second sync."""
    rows = consumed_history(rt)
    shutil.copytree(users(rt.root) / "u_dev", users(rt.root) / "u_ops")
    Indexer(rt).scan()
    assert len(cursors.rows(rt.db(), NAME, DEV)) == rows  # both folders there: nothing moves
    shutil.rmtree(users(rt.root) / "u_dev")
    Indexer(rt).scan()
    assert window(rt, OPS) == {}
    assert len(cursors.rows(rt.db(), NAME, OPS)) == rows


def test_a_copied_folder_then_the_original_renamed_leaves_the_cursor(rt: Runtime) -> None:
    """Two users hold the entries: neither is the one the cursor was for."""
    rows = consumed_history(rt)
    shutil.copytree(users(rt.root) / "u_dev", users(rt.root) / "u_qa")
    Indexer(rt).scan()
    shutil.move(users(rt.root) / "u_dev", users(rt.root) / "u_ops")
    Indexer(rt).scan()
    assert len(cursors.rows(rt.db(), NAME, DEV)) == rows
    assert cursors.rows(rt.db(), NAME, OPS) == [] and cursors.rows(rt.db(), NAME, QA) == []
    assert len(window(rt, OPS)) == len(window(rt, QA)) == 10  # as new, as before


def test_a_user_that_still_has_its_folder_keeps_its_cursor(rt: Runtime) -> None:
    """Another user's entries of the same ids (ids are per user) move nothing."""
    rows = consumed_history(rt)
    for week in range(4):
        add_episode(rt, OPS, f"2026-10-{1 + 7 * week:02d}T09:00:00+00:00", "Other",
                    "Someone else's episode of the same day.", importance=3)
    Indexer(rt).scan()
    assert len(cursors.rows(rt.db(), NAME, DEV)) == rows
    assert cursors.rows(rt.db(), NAME, OPS) == []


def test_the_cursor_waits_for_the_folder_met_after_the_old_ones_removal(
        rt: Runtime, tmp_path: Path) -> None:
    """The old folder's removal synced first (no holder yet: the user is noted), the new
    folder's logs at a later sync: the cursor follows then."""
    rows = consumed_history(rt)
    aside = tmp_path / "aside"
    shutil.move(users(rt.root) / "u_dev", aside)
    Indexer(rt).scan()
    assert len(cursors.rows(rt.db(), NAME, DEV)) == rows  # nobody holds its entries yet
    shutil.move(aside, users(rt.root) / "u_ops")
    Indexer(rt).scan()
    assert window(rt, OPS) == {}
    assert len(cursors.rows(rt.db(), NAME, OPS)) == rows
    assert cursors.rows(rt.db(), NAME, DEV) == []
