"""Reading insights for people (SPEC §10): the list behind ``insights`` and the citation tree
behind ``explain`` — the same functions for the CLI, the HTTP API and MCP."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from everos_reflect.errors import MarkdownError, UnknownEntry
from everos_reflect.markdown.parser import UNDONE, is_entry_id
from everos_reflect.model import (
    MAX_LISTED_EVIDENCE,
    EntryId,
    Kind,
    UserRef,
    id_order,
    meta_text,
)
from everos_reflect.procedural.lessons import lesson_status, rivals_decide, served_statuses
from everos_reflect.provenance import provenance
from everos_reflect.strategies.beliefs import depth_of, instant
from everos_reflect.strategies.provenance import evidence_of, status_of
from everos_reflect.typed_numbers import whole_value_problem

if TYPE_CHECKING:
    from everos_reflect.model import Entry
    from everos_reflect.runtime import Runtime

#: Levels one explain tree shows below its root; a node whose evidence lies deeper is marked
#: ``truncated``. Deeper than a derived record may be (max_depth is at most 3 for insights, 8
#: for belief tiers), not than a narrative: each update merge cites the narrative before it,
#: so a cluster merged weekly for a season is a longer chain. Bounds a hand-edited cycle too.
MAX_TREE_DEPTH = 10
#: Most nodes one explain tree holds; the rest are cut, marked ``truncated``.
MAX_TREE_NODES = 5_000
#: Most characters of one node's text (longer ones are clipped and say from how long), and
#: most characters of text (node texts and a narrative's sentences) one tree holds; past it
#: the rest is cut, marked ``truncated``, as past :data:`MAX_TREE_NODES`. The node cap alone
#: bounded the count, not the size: twelve hand-written insights of 200 KB citing one
#: another made a 2.4 MB log explain as 893 MB of JSON (2 GB of memory, API and MCP too).
MAX_NODE_TEXT_CHARS = 8_000
#: Most characters of a node's ``stale_reason`` (the daemon writes a line; a person, anything).
MAX_REASON_CHARS = 1_000
MAX_TREE_CHARS = 2_000_000


def insight_dict(entry: Entry) -> dict[str, Any]:
    """An insight as ``insights`` answers it (CLI ``--json``, the API, the MCP tool): the first
    :data:`~everos_reflect.model.MAX_LISTED_EVIDENCE` ids of its evidence, as a lesson
    lists its own (``evidence_count``: all; ``explain`` gives the tree). Every id was listed:
    a hand-written insight citing 3,000 records was one row of 3,000 ids, all of them in
    the prompt of an agent calling the MCP tool."""
    meta = entry.meta
    # an id a hand edit wrote twice is one citation, as a lesson's evidence and explain
    # count it: it was listed and counted twice
    evidence = list(dict.fromkeys(evidence_of(entry)))
    return {
        "id": entry.id,
        "kind": entry.kind.value,
        "timestamp": entry.timestamp.isoformat() if entry.timestamp else None,
        "text": entry.content,
        # one piece of text each: a list or mapping by hand is none (lint names it)
        "question": meta_text(meta.get("question")),
        "evidence": evidence[:MAX_LISTED_EVIDENCE],
        "evidence_count": len(evidence),
        # as the tiers read them, each a value of its type (lint names a hand edit that is
        # none): `depth: deep`, `importance: [3]` or `provider: {a: 1}` were served as written
        "depth": depth_of(entry) if meta.get("depth") is not None else None,
        "importance": (importance if whole_value_problem(importance := meta.get("importance"),
                                                         1, 10) is None else None),
        "status": status_of(entry),
        "stale_reason": meta_text(meta.get("stale_reason")),
        "insight_type": meta_text(meta.get("insight_type")),
        "provider": meta_text(meta.get("provider")),
        "deprecated_by": entry.deprecated_by,
    }


def list_insights(runtime: Runtime, ref: UserRef, *, include_stale: bool = False,
                  include_archived: bool = False) -> list[dict[str, Any]]:
    """The user's insights, newest first; active only unless ``include_stale``."""
    kept = [e for e in runtime.store.entries(ref, Kind.INSIGHT)
            if (include_archived or not e.deprecated_by)
            and (include_stale or status_of(e) == "active")]
    kept.sort(key=lambda e: (instant(e.timestamp), id_order(e.id)), reverse=True)
    return [insight_dict(e) for e in kept]


def explain(runtime: Runtime, ref: UserRef, entry_id: str) -> dict[str, Any]:
    """The citation tree of ``entry_id`` down to the Episodes, with dates.

    Each node: ``id``, ``kind``, ``date``, ``text``, ``status``, ``deprecated_by`` and
    ``evidence`` (child nodes); a stale or retired record also its ``stale_reason`` (clipped
    to :data:`MAX_REASON_CHARS`). A merged narrative (an Episode written by Reflection) also
    carries ``sentences`` — each sentence with the source Episodes it stands for, from its
    sentence-level provenance (``recorded`` false when only the entry-level ``sources`` were
    left to go by, e.g. after a hand edit) — and its evidence is those sources, so the tree
    descends from a sentence's claim to what was said. A cited record that no longer exists
    is a node with ``missing: true``, one in a log that cannot be read now (no permission,
    too large) a node with ``unreadable: true`` and the ``problem``; a node whose evidence
    was cut at :data:`MAX_TREE_DEPTH` levels, :data:`MAX_TREE_NODES` nodes or
    :data:`MAX_TREE_CHARS` characters has ``truncated: true``; the ids a node cites that
    stand on its own path (itself, or a record above it: a citation cycle only a hand edit
    makes, which ``lint`` names) are listed in ``cites_back`` instead of walked again;
    a text longer than :data:`MAX_NODE_TEXT_CHARS` is clipped, saying how long it was.
    Raises :class:`UnknownEntry` for an unknown root id, :class:`MarkdownError` for one
    whose log cannot be read.
    """
    from everos_reflect.llm.tasks import clip_text

    EntryId.parse(entry_id)
    cache: dict[str, Entry | None] = {}
    unread: dict[str, MarkdownError] = {}  # not "deleted": their log cannot be read now

    def get(eid: str) -> Entry | None:
        if eid not in cache:
            try:
                cache[eid] = runtime.store.get(ref, eid)
            except MarkdownError as exc:
                cache[eid], unread[eid] = None, exc
            except (UnknownEntry, FileNotFoundError, ValueError):
                cache[eid] = None
        return cache[eid]

    def fetch(ids: Iterable[str], room: int) -> None:
        """Read up to ``room`` of ``ids`` not read yet, each log parsed once for all of them:
        :func:`get` parses an entry's whole log, once per id, so 2,000 Episodes of one day
        cited by one insight re-read that day's log 2,000 times (216 s for a 745 KB log)."""
        wanted: list[str] = []
        for eid in dict.fromkeys(ids):
            if len(wanted) >= room:
                break
            if eid in cache:
                continue
            try:
                runtime.store.path_for_id(ref, eid)
            except ValueError:  # not an id: never an entry
                cache[eid] = None
                continue
            wanted.append(eid)
        unknown: set[str] = set()
        try:
            found = runtime.store.get_many(ref, wanted, unknown)
        except (OSError, ValueError):  # a log that is no file: each id on its own, as before
            return
        for eid in wanted:
            if eid not in unknown:  # else :func:`get` finds out why, id by id
                cache[eid] = found.get(eid)

    lessons: list[dict[str, str]] = []  # the user's lessons as served, read when needed

    def node_status(entry: Entry) -> str:
        """As ``lessons``, the briefing and ``search`` serve it: a lesson contested by no
        live rival (none named, a task id, a lesson deleted by hand) is active; it was
        explained as contested."""
        if entry.kind is not Kind.LESSON:
            return status_of(entry)
        if not rivals_decide(entry.id, entry.meta):
            return lesson_status(entry.id, entry.meta)
        if not lessons:
            lessons.append(served_statuses(runtime.store, ref))
        return lessons[0].get(entry.id, "contested")

    def node(eid: str) -> tuple[dict[str, Any], list[str]]:
        """The node of ``eid`` (evidence not filled in yet) and the ids it cites."""
        entry = get(eid)
        if entry is None and eid in unread:
            return {"id": eid, "unreadable": True, "problem": str(unread[eid]),
                    "evidence": []}, []
        if entry is None and not is_entry_id(eid):  # a typo, say: never an entry, not deleted
            return {"id": eid, "missing": True, "not_an_id": True, "evidence": []}, []
        if entry is None:
            return {"id": eid, "missing": True, "evidence": []}, []
        out: dict[str, Any] = {
            "id": entry.id, "kind": entry.kind.value,
            "date": entry.timestamp.date().isoformat() if entry.timestamp else None,
            "text": clip_text(entry.content or entry.subject, MAX_NODE_TEXT_CHARS),
            "status": node_status(entry) if entry.kind.derived else None,
            "deprecated_by": entry.deprecated_by, "evidence": []}
        # why it no longer stands, where its status says so: the tree said "stale" alone,
        # and which citation broke was listed nowhere for a record below the root
        if out["status"] in ("stale", "retired") and \
                (reason := meta_text(entry.meta.get("stale_reason"))):
            out["stale_reason"] = clip_text(reason, MAX_REASON_CHARS)
        if entry.kind is Kind.ATOMIC_FACT and entry.parent_id:
            out["parent_id"] = entry.parent_id
        # an id a hand edit wrote twice is one citation: listed twice, ``cites_back`` named it
        # twice and its subtree was walked (and shown) twice
        children = list(dict.fromkeys(evidence_of(entry)))
        if _is_narrative(entry):
            found = provenance(entry)
            out["recorded"] = found.recorded
            out["sentences"] = found.to_dict()["sentences"]
            children = list(dict.fromkeys([*children, *entry.sources]))
        return out, children

    if get(entry_id) is None:
        if entry_id in unread:
            raise unread[entry_id]
        raise UnknownEntry(f"no entry {entry_id} for user {ref}")
    # Level by level, at most MAX_TREE_NODES nodes: records citing one another make every
    # path without repeats a branch (twelve that cite the other eleven: ~10^8 nodes), so a
    # node whose evidence is cut off by the budget says so with ``truncated``.
    # The entries a level cites are read together (:func:`fetch`) before it is expanded.
    root, cited = node(entry_id)
    count, chars = 1, _chars(root)
    level = [(root, cited, frozenset({entry_id}))]
    for _depth in range(MAX_TREE_DEPTH):
        fetch((c for _, cited, _ in level for c in cited), MAX_TREE_NODES - count)
        below = []
        for out, cited, path in level:
            for child_id in cited:
                if child_id in path:  # a citation cycle (lint names it): shown, not walked
                    out.setdefault("cites_back", []).append(child_id)
                    continue
                if count >= MAX_TREE_NODES:
                    out["truncated"] = True
                    break
                child, grand = node(child_id)
                cost = _chars(child)
                if chars + cost > MAX_TREE_CHARS:
                    out["truncated"] = True
                    break
                count, chars = count + 1, chars + cost
                out["evidence"].append(child)
                below.append((child, grand, path | {child_id}))
        level = below
    # the deepest level shown: evidence below it was cut as surely as past the node budget, and
    # a node showing none read as a record that cites nothing
    for out, cited, path in level:
        if any(child_id not in path for child_id in cited):
            out["truncated"] = True
        if back := [child_id for child_id in cited if child_id in path]:
            out["cites_back"] = back
    return root


def _chars(node: dict[str, Any]) -> int:
    """The characters of text a tree node holds: its text and its sentences with their ids."""
    return len(node.get("text") or "") + len(node.get("stale_reason") or "") + sum(
        len(s["text"]) + sum(len(i) for i in s["sources"]) for s in node.get("sentences") or ())


def _is_narrative(entry: Entry) -> bool:
    """A Reflection narrative: an Episode that replaced others (its parent is a cluster)."""
    return entry.kind is Kind.EPISODE and entry.parent_type == "cluster" and bool(entry.sources)


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_tree(tree: dict[str, Any], indent: str = "") -> list[str]:
    """The tree as indented text lines (for the terminal); a narrative's sentences follow its
    line, each with the sources it came from."""
    if tree.get("not_an_id"):
        line = f"{indent}{tree['id']}  (not an entry id: it cites nothing)"
    elif tree.get("missing"):
        line = f"{indent}{tree['id']}  (deleted)"
    elif tree.get("unreadable"):
        line = f"{indent}{tree['id']}  (its log cannot be read now: see lint)"
    else:
        status = tree.get("status") if tree.get("status") not in (None, "active") else None
        if status and tree.get("stale_reason"):
            status = f"{status}: {_clip(tree['stale_reason'], 120)}"
        archived = tree.get("deprecated_by")
        marks = [m for m in (status, "merge undone" if archived == UNDONE else
                             f"archived -> {archived}" if archived else None) if m]
        extra = f"  [{', '.join(marks)}]" if marks else ""
        text = _clip(tree.get("text") or "", 100)
        line = f"{indent}{tree['id']}  {tree.get('date') or 'undated'}  {text}{extra}"
    lines = [line]
    for sentence in tree.get("sentences") or []:
        sources = ", ".join(sentence["sources"]) or "no source recorded"
        lines.append(f'{indent}  | "{_clip(sentence["text"], 70)}" <- {sources}')
    for child in tree.get("evidence", []):
        lines += render_tree(child, indent + "  ")
    for cited in tree.get("cites_back", []):
        lines.append(f"{indent}  {cited}  (cited again: "
                     f"{'itself' if cited == tree.get('id') else 'a record above it'}, "
                     "a citation cycle; see lint)")
    if tree.get("truncated"):
        lines.append(f"{indent}  … more evidence not shown (the tree is cut at "
                     f"{MAX_TREE_DEPTH} levels, {MAX_TREE_NODES:,} records or "
                     f"{MAX_TREE_CHARS:,} characters)")
    return lines
