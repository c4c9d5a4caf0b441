"""Looking up an entry whose own block cannot be read names the block's line.

``explain`` (and every ``get``) of an Episode whose timestamp was broken by hand said
``episode-….md:0: cannot look up …: its entry block cannot be read (see lint)``: no line 0
exists, and the problem lint names on the block's line was not said.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import MarkdownError
from everos_reflect.lint import lint_report
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

REF = UserRef.of("u1")


def test_a_broken_entry_block_is_named_on_its_line(root: Path) -> None:
    rt = Runtime(root, embedder=HashEmbedder(16))
    rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00",
                                        "parent_type": "memcell", "session_id": "s"},
                    {"Subject": "Deploy", "Content": "Deploy failed on Friday."})
    broken = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T11:00:00+00:00",
                                                 "parent_type": "memcell", "session_id": "s"},
                             {"Subject": "Again", "Content": "Deploy failed again."})
    path = rt.store.path_for_id(REF, broken.id)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("timestamp: 2026-10-12T11:00:00+00:00",
                                 "timestamp: [unclosed"), encoding="utf-8")
    line = 1 + text.splitlines().index("timestamp: 2026-10-12T11:00:00+00:00")

    with pytest.raises(MarkdownError) as raised:
        rt.store.get(REF, broken.id)
    assert raised.value.line > 0
    assert (f"{path.name}:{raised.value.line}: cannot look up {broken.id}: its entry block "
            f"cannot be read: entry {broken.id}: ") in str(raised.value)
    named = [p for p in lint_report(root)["problems"] if broken.id in p["message"]]
    assert named and {p["line"] for p in named} == {raised.value.line}
    assert abs(raised.value.line - line) <= 3  # the block's own lines
    rt.close()
