"""A derived tier's commit killed after its Markdown write, before its audit row, then the
user's folder renamed by hand before the next start. Recovery looked for the window's outputs
under the old name, found none and withdrew the commit: the insights stood in the renamed
folder with no derivation_report row. They are now found in the folder that holds them, and
the row (and the cursor) go to that user, as the rows of merges and derivations follow a
renamed folder."""

from __future__ import annotations

import shutil

import pytest

from everos_reflect.engine.recovery import recover_all
from everos_reflect.index import cursors
from everos_reflect.index.audit import list_derivations
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import insights as insights_mod
from everos_reflect.strategies.insights import NAME
from tests import test_recovery_hook as hook
from tests.test_recovery_hook import DEV, crash, history, window

MOVED = UserRef.of("u_moved")

rt = hook.rt  # a runtime with the extractive LLM


def test_an_insight_commit_killed_before_its_row_gets_it_in_the_renamed_folder(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    history(rt)
    before = window(rt)
    crash(monkeypatch, rt, (insights_mod, "sync"))  # after the Markdown write
    written = sorted(e.id for e in rt.store.entries(DEV, Kind.INSIGHT))
    assert written and len(cursors.intents(rt.db(), NAME)) == 1
    users = rt.root / DEV.app / DEV.project / "users"
    shutil.move(users / DEV.user_id, users / MOVED.user_id)
    Indexer(rt).scan()

    assert recover_all(rt)[NAME] == {"recovered": 1}

    assert cursors.intents(rt.db(), NAME) == []
    (row,) = list_derivations(rt.db(), strategy=NAME)
    assert (row["owner_id"], row["status"]) == (MOVED.user_id, "ok")
    assert sorted(row["outputs"]) == written and sorted(row["inputs"]) == sorted(before)
    assert sorted(e.id for e in rt.store.entries(MOVED, Kind.INSIGHT)) == written
