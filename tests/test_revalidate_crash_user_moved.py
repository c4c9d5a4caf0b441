"""revalidate_insights killed after a verdict's Markdown write, before its audit row, then the
user's folder renamed by hand before the next start. Recovery looked for what the verdict
wrote under the old name, found nothing and dropped the note: the revision (or the insight
kept or retired) stood in the renamed folder with no derivation_report row, for good. It is
now settled in the folder that holds the insight, its row under that user, as the rows of
merges and derivations follow a renamed folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.index import cursors
from everos_reflect.index.audit import list_derivations
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.strategies.revalidate import NAME, RevalidateInsights
from tests.test_derived_crash_revalidate import _killed_at
from tests.test_provenance import DEV

pytest_plugins = ["tests.fake_openai"]

MOVED = UserRef.of("u_moved")


@pytest.mark.parametrize("verdict", ["revise", "retire"])
def test_a_verdict_killed_before_its_row_gets_it_in_the_renamed_folder(
        root: Path, fake_openai: Any, monkeypatch: pytest.MonkeyPatch, verdict: str) -> None:
    rt, first = _killed_at(root, fake_openai, monkeypatch, json.dumps(
        {"verdict": verdict, "insight": "The user reverted auth changes three times.",
         "evidence": [1, 2]}), "everos_reflect.strategies.revalidate.sync")
    users = root / DEV.app / DEV.project / "users"
    shutil.move(users / DEV.user_id, users / MOVED.user_id)
    Indexer(rt).scan()

    assert RevalidateInsights().recover(rt) == {"recovered": 1}

    insights = {e.id: e for e in rt.store.entries(MOVED, Kind.INSIGHT)}
    written = insights[first.id].deprecated_by if verdict == "revise" else first.id
    assert written is not None
    rows = [(r["owner_id"], r["status"], r["inputs"], r["outputs"])
            for r in list_derivations(rt.db(), strategy=NAME)]
    assert rows == [(MOVED.user_id, "ok", [first.id], [written])]
    assert cursors.intents(rt.db(), NAME) == []
