"""Two users' narratives naming one cluster id (a narrative's log copied by hand into another
user's folder): once the user holding it lets it go (its folder renamed), the cluster goes to
the narrative of the user a ``reindex`` takes first (users in sorted order), as it rebuilds it.

The renamed user's narrative, synced before the copy's owner was tried again, founded the
cluster under the new name, where a rebuild gives it to the copy's owner and attaches the
renamed user's narrative nowhere."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import settling
from tests.reflect_fixtures import ANDREW
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, merged_root

pytestmark = pytest.mark.usefixtures("settle_at_once")


@pytest.mark.parametrize(("renamed_to", "holder"), [("u_cy", "u_bob"), ("u_aa", "u_aa")])
def test_a_copied_narrative_s_cluster_goes_to_the_user_a_reindex_takes_first(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renamed_to: str,
        holder: str) -> None:
    rt, _, narrative = merged_root(root)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    try:
        users = rt.root / "default_app" / "default_project" / "users"
        path = rt.store.path_for_id(ANDREW, narrative)
        (users / "u_bob" / "episodes").mkdir(parents=True)
        shutil.copyfile(path, users / "u_bob" / "episodes" / path.name)
        Indexer(rt).scan()
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "copied")

        os.rename(users / "u_andrew", users / renamed_to)
        Indexer(rt).scan()

        after = cluster_tables(rt)
        assert [(c[3], c[7]) for c in after["clusters"]] == [(holder, narrative)]
        assert after == as_reindexed(rt, tmp_path / "renamed")
    finally:
        rt.close()
