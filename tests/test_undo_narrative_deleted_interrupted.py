"""An undo a crash interrupted, then its narrative or its facts deleted by hand (and its user's
folder renamed), before the next start finishes it.

Finished as written down, the undo archived a narrative or facts no log holds any more: it
failed at every start (its row kept for ever), or, the folder renamed as well, was dropped
with a warning because no user's logs held the narrative, leaving the sources archived toward
an entry that no longer exists (hidden from search for good) and its facts live."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import date

import pytest

from everos_reflect.index import merge_journal
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from everos_reflect.strategies import undo as undo_mod
from everos_reflect.strategies.undo import undo_merge
from tests.test_undo import REF, _delete_entry, add, merge, pets, report_status
from tests.test_undo_user_moved import journal_rows, marks, users

ZED = UserRef.of("u_zed")

#: each step of an undo, as the name of what is killed when it starts
STEPS: dict[str, Callable[[Runtime], tuple[object, str]]] = {
    "restoring": lambda rt: (rt.store, "undeprecate"),
    "archiving": lambda rt: (rt.store, "deprecate"),
    "auditing": lambda rt: (undo_mod, "_mark_reports_undone"),
    "syncing": lambda rt: (undo_mod, "_resync"),
    "forgetting": lambda rt: (merge_journal, "delete"),
}


def undo_killed_at(rt: Runtime, monkeypatch: pytest.MonkeyPatch,
                   step: str) -> tuple[list[Entry], Entry]:
    """A merge of two sources, then an undo killed as ``step`` starts: the sources and the
    narrative as merged."""
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.",
                      day=date(2026, 8, 20))
    owner, name = STEPS[step](rt)

    def killed(*args: object, **kwargs: object) -> None:
        raise OSError("killed")

    with monkeypatch.context() as patch:
        patch.setattr(owner, name, killed)
        with pytest.raises(OSError):
            undo_merge(rt, REF, narrative.id)
    assert journal_rows(rt) == 1
    return sources, narrative


def assert_undone_in(rt: Runtime, ref: UserRef, sources: list[Entry], narrative: Entry) -> None:
    """Every source and its fact live in ``ref``'s logs, every fact of the deleted narrative
    archived ``undone``, nothing archived toward the narrative, the audit row ``undone``, and
    no journal row left."""
    marked = marks(rt, ref)
    assert narrative.id not in marked
    assert all(marked[e.id] is None for e in sources)
    assert narrative.id not in marked.values()
    facts = [e.id for e in rt.store.entries(ref, Kind.ATOMIC_FACT)
             if e.parent_id == narrative.id]
    assert facts and all(marked[f] == "undone" for f in facts)
    assert report_status(rt, narrative.id) == "undone"
    assert journal_rows(rt) == 0


@pytest.mark.parametrize("step", STEPS)
def test_an_interrupted_undo_whose_narrative_was_deleted_is_finished(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    sources, narrative = undo_killed_at(rt, monkeypatch, step)
    _delete_entry(rt, narrative)

    journal.recover(rt, Indexer(rt))

    assert_undone_in(rt, REF, sources, narrative)


@pytest.mark.parametrize("source_deleted", [False, True])
@pytest.mark.parametrize("step", STEPS)
def test_an_interrupted_undo_whose_narrative_was_deleted_and_folder_renamed_is_finished(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, step: str, source_deleted: bool) -> None:
    sources, narrative = undo_killed_at(rt, monkeypatch, step)
    _delete_entry(rt, narrative)
    if source_deleted:  # the others are still restored
        _delete_entry(rt, sources.pop(0))
    shutil.move(users(rt) / "u_andrew", users(rt) / "u_zed")

    journal.recover(rt, Indexer(rt))

    assert sorted(p.name for p in users(rt).iterdir()) == ["u_zed"]
    assert_undone_in(rt, ZED, sources, narrative)
    owners = rt.db().execute("SELECT owner_id FROM reflection_report").fetchall()
    assert [tuple(r) for r in owners] == [("u_zed",)]  # the audit followed the folder


@pytest.mark.parametrize("what", ["log", "entry"])
@pytest.mark.parametrize("step", STEPS)
def test_an_interrupted_undo_whose_facts_were_deleted_is_finished(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, step: str, what: str) -> None:
    sources, narrative = undo_killed_at(rt, monkeypatch, step)
    facts = [e for e in rt.store.entries(REF, Kind.ATOMIC_FACT) if e.parent_id == narrative.id]
    if what == "log":
        rt.store.path_for_id(REF, facts[0].id).unlink()
    else:
        _delete_entry(rt, facts[0])

    journal.recover(rt, Indexer(rt))

    marked = marks(rt, REF)
    assert marked[narrative.id] == "undone"
    assert all(marked[e.id] is None for e in sources)
    assert all(marked.get(f.id, "undone") == "undone" for f in facts)
    assert report_status(rt, narrative.id) == "undone"
    assert journal_rows(rt) == 0


@pytest.mark.parametrize("step", STEPS)
def test_an_interrupted_undo_whose_narrative_log_was_replaced_archives_no_person_s_entry(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """The narrative's log replaced by hand with one holding a person's Episode under the
    narrative's id: finishing the undo archived that Episode ``undone``."""
    sources, narrative = undo_killed_at(rt, monkeypatch, step)
    rt.store.path_for_id(REF, narrative.id).write_text(f"""---
type: episode_daily
schema_version: 1
user_id: u_andrew
date: '2026-08-20'
---
<!-- entry:{narrative.id} -->
---
owner_id: u_andrew
timestamp: 2026-08-20T08:00:00+00:00
parent_type: memcell
---
## Subject
Hiking

## Content
Andrew went hiking in the hills with his sister.
<!-- /entry:{narrative.id} -->
""")

    journal.recover(rt, Indexer(rt))

    marked = marks(rt, REF)
    assert marked[narrative.id] is None  # the person's Episode stays live
    assert all(marked[e.id] is None for e in sources)
    assert report_status(rt, narrative.id) == "undone"
    assert journal_rows(rt) == 0


@pytest.mark.parametrize("step", STEPS)
def test_an_undo_whose_folder_was_renamed_and_its_old_name_made_again_is_finished_where_it_went(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """An Episode added under the old name after the rename (a new folder): the undo was
    finished there, on entries it does not hold, and dropped, the narrative left live in
    the renamed folder beside its restored sources."""
    sources, narrative = undo_killed_at(rt, monkeypatch, step)
    shutil.move(users(rt) / "u_andrew", users(rt) / "u_zed")
    newcomer = add(rt, date(2026, 9, 1), "Garden", "Andrew planted tomatoes.")

    journal.recover(rt, Indexer(rt))

    marked = marks(rt, ZED)
    assert marked[narrative.id] == "undone"
    assert all(marked[e.id] is None for e in sources)
    assert marks(rt, REF) == {newcomer.id: None}
    assert report_status(rt, narrative.id) == "undone"
    assert journal_rows(rt) == 0
