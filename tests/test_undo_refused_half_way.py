"""An undo a log refuses (an id twice in it: archive writers never touch such a log) is refused
with every log as it was, never half way. It restored the sources first and was refused at the
narrative's log (or at the second of the sources' logs): the command said "refused" (exit 1,
"nothing changed") of a folder half undone, the narrative live beside its sources; the journal
row stayed, and every start logged "cannot finish the interrupted undo … yet" for as long as
the log held the id twice. Every log an undo writes is now checked before the first write; a
log changed by hand after that check (or while an interrupted undo waited) has the undo rolled
back, the sources archived toward the narrative again, and the error says so."""

from __future__ import annotations

import logging
import re
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import MarkdownError
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Entry
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from everos_reflect.strategies.undo import undo_merge
from tests.test_undo import (
    REF,
    SETTINGS,
    _undo_killed_after_restoring,
    add,
    deprecated_in_markdown,
    invoke,
    merge,
    pets,
    report_status,
    snapshot,
)
from tests.test_undo_user_moved import journal_rows

pytestmark = pytest.mark.usefixtures("settle_at_once")


@pytest.fixture
def rt(root: Path) -> Runtime:
    runtime = Runtime(root, SETTINGS, embedder=HashEmbedder(64))
    yield runtime
    runtime.close()


def merged(rt: Runtime) -> tuple[list[Entry], Entry]:
    """Two sources (in two logs) merged into a narrative (in a third), with another Episode
    beside the narrative."""
    sources = pets(rt, 2)
    narrative = merge(rt, sources, "Andrew had no pets. He adopted Toby.", day=date(2026, 8, 20))
    add(rt, date(2026, 8, 20), "Walk", "Walked Toby in the park.")
    Indexer(rt).scan()
    return sources, narrative


def pasted_twice(rt: Runtime, log_of: str) -> Path:
    """The first entry of the log holding ``log_of`` pasted again at its end (its id twice),
    as a person starting a new entry from an old one."""
    path = rt.store.path_for_id(REF, log_of)
    text = path.read_text()
    block = re.search(r"<!-- entry:(\S+) -->.*?<!-- /entry:\1 -->\n", text, flags=re.S)
    assert block is not None
    path.write_text(text + "\n" + block.group(0))
    return path


def as_merged(rt: Runtime, sources: list[Entry], narrative: Entry) -> None:
    marked = deprecated_in_markdown(rt)
    assert all(marked[e.id] == narrative.id for e in sources)
    assert marked[narrative.id] is None
    assert report_status(rt, narrative.id) == "ok"
    assert journal_rows(rt) == 0


@pytest.mark.parametrize("where", ["narrative", "second source"])
def test_an_undo_a_log_refuses_changes_nothing(rt: Runtime, where: str) -> None:
    sources, narrative = merged(rt)
    twice = pasted_twice(rt, narrative.id if where == "narrative" else sources[1].id)
    before = snapshot(rt)

    with pytest.raises(MarkdownError) as refused:
        undo_merge(rt, REF, narrative.id)

    assert refused.value.path == rt.store.rel(twice)
    assert "duplicate entry id" in str(refused.value)
    assert snapshot(rt) == before  # every log as it was
    as_merged(rt, sources, narrative)


def test_the_command_says_refused_of_logs_left_as_they_were(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    from everos_reflect.cli import demo_cmds

    sources, narrative = merged(rt)
    twice = pasted_twice(rt, narrative.id)
    before = snapshot(rt)
    monkeypatch.setattr(demo_cmds, "open_runtime", lambda root: rt)
    monkeypatch.setattr(rt, "close", lambda: None)

    refused = invoke(rt.root, narrative.id, "--user", "u_andrew")

    assert refused.exit_code == 1
    assert refused.stderr.startswith(f"error: {rt.store.rel(twice)}:")
    assert f"not undoing {narrative.id} in this file: duplicate entry id" in refused.stderr
    assert snapshot(rt) == before
    as_merged(rt, sources, narrative)

    twice.write_text(twice.read_text().rsplit("\n<!-- entry:", 1)[0] + "\n")  # fixed by hand
    assert invoke(rt.root, narrative.id, "--user", "u_andrew").exit_code == 0
    assert deprecated_in_markdown(rt)[narrative.id] == "undone"


def test_a_log_changed_by_hand_after_the_check_rolls_the_undo_back(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The id pasted twice while the undo ran (after its check, before it archived the
    narrative): the sources it restored are archived toward the narrative again, and the
    error says so."""
    sources, narrative = merged(rt)
    marked = deprecated_in_markdown(rt)
    restored = sorted(i for i, by in marked.items() if by == narrative.id)  # facts too
    real = rt.store.undeprecate

    def pasting(*args: object, **kwargs: object) -> object:
        restored = real(*args, **kwargs)  # type: ignore[arg-type]
        pasted_twice(rt, narrative.id)
        return restored

    monkeypatch.setattr(rt.store, "undeprecate", pasting)
    with pytest.raises(MarkdownError) as refused:
        undo_merge(rt, REF, narrative.id)

    said = str(refused.value)
    assert "duplicate entry id" in said
    assert (f"the undo of {narrative.id} is rolled back ({', '.join(restored)} archived "
            "toward it again): the logs are as before it") in said
    assert deprecated_in_markdown(rt) == marked
    as_merged(rt, sources, narrative)


def test_an_interrupted_undo_a_log_refuses_is_rolled_back_once(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Killed after restoring, then the narrative's log given an id twice: the next start
    rolls it back and says so once; it logged "cannot finish … yet" at every start, the
    narrative live beside its sources for as long as the log held the id twice."""
    sources, narrative = _undo_killed_after_restoring(rt, monkeypatch)
    assert journal_rows(rt) == 1
    pasted_twice(rt, narrative.id)

    with caplog.at_level(logging.WARNING):
        journal.recover(rt, Indexer(rt))
        journal.recover(rt, Indexer(rt))

    as_merged(rt, sources, narrative)
    said = [r.getMessage() for r in caplog.records if "interrupted undo" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith(f"the interrupted undo of {narrative.id} ({REF}) cannot be "
                              "finished: ")
    assert "rolled back" in said[0] and "duplicate entry id" in said[0]
