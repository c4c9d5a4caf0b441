"""The audit of a merge after its user's folder was renamed by hand (SPEC §6).

``reflection_report`` lives in ``system.db`` alone and is never rebuilt from Markdown, so a
row keeps whatever owner it was written with, while the index follows the folder. After
``mv users/u_andrew users/u_bob`` and a scan, ``reports`` still named u_andrew, and an
``undo`` of the merge as u_bob (the only user holding it now) left its row ``ok``, which
``explain`` and the logs contradicted: the narrative archived ``undone``, its sources live.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from everos_reflect.cli.reflect_cmds import list_reports
from everos_reflect.index.db import transaction
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.insight_views import explain
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import make_runtime, run_reflection, seed_pets

#: logs moved by the test itself, no other writer (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")


def users_folder(root: Path) -> Path:
    return root / "default_app" / "default_project" / "users"


def test_a_renamed_folder_takes_its_audit_rows_and_undo_marks_them(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    run_reflection(rt)
    [row] = list_reports(rt)
    assert (row["owner_id"], row["status"]) == ("u_andrew", "ok")
    narrative = row["merged_entry_id"]

    shutil.move(users_folder(root) / "u_andrew", users_folder(root) / "u_bob")
    Indexer(rt).scan()

    [row] = list_reports(rt)
    assert (row["owner_id"], row["status"]) == ("u_bob", "ok")
    result = undo_merge(rt, BOB, narrative)
    assert result.reports == [row["id"]]
    [row] = list_reports(rt)
    assert (row["owner_id"], row["status"]) == ("u_bob", "undone")
    assert explain(rt, BOB, narrative)["deprecated_by"] == "undone"


def merged_then(root: Path, move: str) -> tuple[Runtime, str]:
    """A merge of Andrew's pets, then his folder ``move``d to u_bob (renamed, or copied
    and the original removed); the narrative's id."""
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    run_reflection(rt)
    [row] = list_reports(rt)
    old, new = users_folder(root) / "u_andrew", users_folder(root) / "u_bob"
    if move == "copied":
        shutil.copytree(old, new)
        Indexer(rt).scan()
        assert [r["owner_id"] for r in list_reports(rt)] == ["u_andrew"]  # two hold it: kept
        shutil.rmtree(old)
    else:
        shutil.move(old, new)
    return rt, row["merged_entry_id"]


def test_an_undo_as_the_new_name_before_any_scan_marks_the_row(root: Path) -> None:
    rt, narrative = merged_then(root, "renamed")
    result = undo_merge(rt, BOB, narrative)
    [row] = list_reports(rt)
    assert result.reports == [row["id"]]
    assert (row["owner_id"], row["status"]) == ("u_bob", "undone")


def test_a_folder_copied_then_the_original_removed_takes_its_rows_at_the_scan(
        root: Path) -> None:
    rt, narrative = merged_then(root, "copied")
    Indexer(rt).scan()
    [row] = list_reports(rt)
    assert (row["owner_id"], row["status"]) == ("u_bob", "ok")
    assert undo_merge(rt, BOB, narrative).reports == [row["id"]]


def test_a_reindex_after_a_rename_moves_the_rows_too(root: Path) -> None:
    rt, _ = merged_then(root, "renamed")
    Indexer(rt).reindex()
    assert [r["owner_id"] for r in list_reports(rt)] == ["u_bob"]


def test_a_row_stays_with_its_user_while_the_folder_is_there(root: Path) -> None:
    """Ids are per user: another user's merge with the same id and sources takes no row."""
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    seed_pets(rt, BOB)
    run_reflection(rt)
    Indexer(rt).reindex()
    rows = list_reports(rt)
    assert sorted(r["owner_id"] for r in rows) == ["u_andrew", "u_bob"]
    assert len({r["merged_entry_id"] for r in rows}) == 1


def test_the_rows_of_attempts_that_merged_nothing_follow_the_last_merge(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    conn = rt.db()
    with transaction(conn):
        conn.execute(
            "INSERT INTO reflection_report (id, app_id, project_id, owner_id, cluster_id, mode, "
            "source_count, source_members, deprecated_fact_count, status, error, created_at) "
            "VALUES ('rr_failed', 'default_app', 'default_project', 'u_andrew', 'cl_x', "
            "'init', 3, '[]', 0, 'failed', 'timeout', '2026-01-01T00:00:00+00:00')")
    run_reflection(rt)
    shutil.move(users_folder(root) / "u_andrew", users_folder(root) / "u_bob")
    Indexer(rt).scan()
    assert [(r["status"], r["owner_id"]) for r in list_reports(rt)] == [
        ("ok", "u_bob"), ("failed", "u_bob")]
