"""Property: whatever a person does to a daily log by hand, the writers change only the bytes
they must. A log written by the daemon is hand-edited (notes between entries, comments and
unknown keys in metadata, keys reordered, odd characters in bodies, CRLF, a BOM, no final
newline), then archived into, restored and appended to; every byte of the person's text is
still there, in place."""

from __future__ import annotations

from datetime import UTC, date, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.markdown import writer
from everos_reflect.markdown.parser import parse_log
from everos_reflect.model import Kind

PATH = "u/episodes/episode-2026-10-12.md"
IDS = [f"ep_20261012_{n:04d}" for n in range(1, 6)]

_body_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=30)
# YAML allows no control character, not even in a comment, and breaks lines at U+2028/U+2029
_note = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"),
                              blacklist_characters="<\ufeff"), max_size=30)


def _log(bodies: list[str]) -> str:
    text = writer.new_log_text(Kind.EPISODE, "u", date(2026, 10, 12))
    for eid, body in zip(IDS, bodies, strict=False):
        meta = {"owner_id": "u", "timestamp": datetime(2026, 10, 12, 9, tzinfo=UTC),
                "parent_type": "memcell", "parent_id": "mc_1"}
        text += writer.render_entry(eid, meta, {"Subject": "s", "Content": body or "c"})
    return text


def _hand_edit(text: str, edits: list[tuple[int, str]], note: str) -> str:
    lines = text.split("\n")
    for kind, (at, what) in enumerate(edits):
        i = at % len(lines)
        line = lines[i]
        if what == "note" and line.startswith("<!-- /entry:"):
            lines.insert(i + 1, note)
        elif what == "comment" and line.startswith("parent_type:"):
            lines[i] = line + "   # " + note.replace("#", "")
        elif what == "unknown" and line.startswith("owner_id:"):
            lines.insert(i + 1, f"mood{kind}: 'tired'")
        elif what == "reorder" and line.startswith("owner_id:"):
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        elif what == "fm comment" and line.startswith("user_id:"):
            lines.insert(i, "# " + note)
        elif what == "blank" and line.startswith("## Content"):
            lines.insert(i, "")
        elif what == "trailing space" and line.startswith("## Subject"):
            lines[i] = line + "  "
    return "\n".join(lines)


def _only_inserted(before: str, after: str) -> bool:
    """``after`` is ``before`` with one run of characters inserted somewhere."""
    n = 0
    while n < min(len(before), len(after)) and before[n] == after[n]:
        n += 1
    return after[len(after) - (len(before) - n):] == before[n:]


@settings(max_examples=300, deadline=None)
@given(
    bodies=st.lists(_body_text, min_size=5, max_size=5),
    edits=st.lists(st.tuples(st.integers(0, 200), st.sampled_from(
        ["note", "comment", "unknown", "reorder", "fm comment", "blank", "trailing space"])),
        max_size=12),
    note=_note,
    crlf=st.booleans(), bom=st.booleans(), final_newline=st.booleans(),
    archive=st.dictionaries(st.sampled_from(IDS), st.sampled_from(IDS), min_size=1,
                            max_size=3),
)
def test_writers_keep_every_byte_of_a_hand_edited_log(
    bodies: list[str], edits: list[tuple[int, str]], note: str, crlf: bool, bom: bool,
    final_newline: bool, archive: dict[str, str],
) -> None:
    text = _hand_edit(_log(bodies), edits, note)
    if crlf:
        text = text.replace("\n", "\r\n")
    if bom:
        text = "\ufeff" + text
    if not final_newline:
        text = text.rstrip("\r\n")
    before = parse_log(text, PATH)
    assert before.ok and [e.id for e in before.entries] == IDS, before.diagnostics
    archived = writer.add_deprecations(text, archive)
    assert _only_inserted(text, archived)
    after = parse_log(archived, PATH)
    assert [(e.id, e.meta, e.sections, e.raw) for e in after.entries] == [
        (e.id, e.meta, e.sections, e.raw) for e in before.entries]
    assert after.deprecated_entries == archive
    assert writer.remove_deprecations(archived, list(archive)) == text
    block = writer.render_entry("ep_20261012_0006", before.entries[0].meta, {"Content": "new"})
    appended = writer.append_entry(archived, block)
    assert _only_inserted(archived, appended)
    assert [e.raw for e in parse_log(appended, PATH).entries][:5] == [
        e.raw for e in after.entries]
