"""An append refused because its block would not read back names that block's line.

``_parse_back`` refuses to write an entry the parser would not read back as written; its
``MarkdownError`` said ``episode-….md:0: refusing to write …``: no file has a line 0. It names
the line the refused block would start on (or its problem's line), as a ``get`` of an
unreadable block does since session 47 (tests/test_unreadable_entry_line.py).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.errors import MarkdownError
from everos_reflect.markdown import writer
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Kind, UserRef

REF = UserRef.of("u1")
DAY = date(2026, 10, 1)


def _episode(subject: str) -> tuple[dict[str, object], dict[str, str]]:
    return ({"timestamp": "2026-10-01T10:00:00+00:00", "parent_type": "memcell",
             "session_id": "s"}, {"Subject": subject, "Content": f"{subject} happened."})


def _unclosed(monkeypatch: pytest.MonkeyPatch, bad_id: str) -> None:
    """Render ``bad_id``'s block without its close marker: a block that does not read back."""
    real = writer.render_entry

    def render(entry_id: str, meta: Any, sections: Any) -> str:
        block = real(entry_id, meta, sections)
        return block.replace(f"<!-- /entry:{entry_id} -->", "") if entry_id == bad_id else block

    monkeypatch.setattr(writer, "render_entry", render)


@pytest.mark.parametrize("batch", [False, True])
def test_a_refused_append_names_its_blocks_line(
        root: Path, monkeypatch: pytest.MonkeyPatch, batch: bool) -> None:
    store = MarkdownStore(root)
    store.append(REF, Kind.EPISODE, *_episode("first"), day=DAY)
    path = store.log_path(REF, Kind.EPISODE, DAY)
    before = path.read_bytes()
    lines_before = before.decode().count("\n")
    bad = "ep_20261001_0003" if batch else "ep_20261001_0002"
    _unclosed(monkeypatch, bad)

    with pytest.raises(MarkdownError) as raised:
        if batch:  # the second of two: the first block's lines come before it
            store.append_many(REF, Kind.EPISODE, [_episode("second"), _episode("third")],
                              day=DAY)
        else:
            store.append(REF, Kind.EPISODE, *_episode("second"), day=DAY)

    assert path.read_bytes() == before  # nothing written
    # the line of the refused block's open marker in the log as it would have been written
    monkeypatch.undo()
    store.append_many(REF, Kind.EPISODE,
                      [_episode("second"), _episode("third")] if batch else [_episode("second")],
                      day=DAY)
    written = path.read_text(encoding="utf-8").splitlines()
    line = 1 + written.index(f"<!-- entry:{bad} -->")
    assert line > lines_before
    assert raised.value.line == line, str(raised.value)
    assert (f"{path.name}:{line}: refusing to write {bad}: entry '{bad}' is not closed by "
            f"<!-- /entry:{bad} -->") in str(raised.value)
