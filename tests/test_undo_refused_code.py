"""An undo the entry's state refuses is a 409 ``undo_refused`` at the API, as a later merge
built on it always was: an entry that is no merged narrative, a merge already undone and one
withdrawn by an interrupted merge answered 400 ``bad_request``, the code of a malformed
request, although the request was well formed. The CLI says the same words, exit 1."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.errors import UndoRefused
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.undo import undo_merge
from tests.api_client import ApiClient
from tests.test_undo import REF, add, merge, pets


def _api_undo(rt: Runtime, entry_id: str) -> tuple[int, str, str]:
    resp = ApiClient(rt)("POST", "/api/v1/ome/undo",
                         json={"entry_id": entry_id, "user_id": REF.user_id})
    error = resp.json()["error"]
    return resp.status_code, error["code"], error["message"]


def _cli_undo(root: Path, entry_id: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["undo", entry_id, "--user", REF.user_id,
                                      "--root", str(root)])
    return result.exit_code, result.stderr


def test_undo_of_an_entry_that_is_no_merge_is_refused_409(rt: Runtime) -> None:
    episode = add(rt, date(2026, 8, 10), "Andrew pets", "Andrew adopted a dog.")
    said = f"{episode.id} is not a merged narrative (parent_type: memcell)"
    with pytest.raises(UndoRefused, match=r"is not a merged narrative"):
        undo_merge(rt, REF, episode.id)
    status, code, message = _api_undo(rt, episode.id)
    assert (status, code) == (409, "undo_refused") and message.startswith(said), message
    exit_code, stderr = _cli_undo(rt.root, episode.id)
    assert exit_code == 1 and stderr.startswith(f"error: {said}"), stderr


def test_undo_of_a_merge_already_undone_is_refused_409(rt: Runtime) -> None:
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.", day=date(2026, 8, 20))
    undo_merge(rt, REF, narrative.id)
    said = f"the merge that wrote {narrative.id} was already undone"
    with pytest.raises(UndoRefused, match="already undone"):
        undo_merge(rt, REF, narrative.id)
    assert _api_undo(rt, narrative.id) == (409, "undo_refused", said)
    exit_code, stderr = _cli_undo(rt.root, narrative.id)
    assert exit_code == 1 and stderr == f"error: {said}\n", stderr


def test_undo_of_a_narrative_withdrawn_by_an_interrupted_merge_is_refused_409(
        rt: Runtime) -> None:
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.", day=date(2026, 8, 20))
    # what a merge killed before it archived its sources leaves: the narrative withdrawn
    # (archived toward itself), the sources live
    rt.store.undeprecate(REF, [s.id for s in sources])
    rt.store.deprecate(REF, {narrative.id: narrative.id})
    status, code, message = _api_undo(rt, narrative.id)
    assert (status, code) == (409, "undo_refused"), message
    assert message.startswith(f"{narrative.id} was withdrawn by an interrupted merge")
