"""Helpers shared by the Reflection tests: a runtime on a tmp root, episodes, a run, invariants.

Plain functions (no fixtures), so each test says exactly what it builds.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.embedding.base import Embedder
from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.llm.base import LLM
from everos_reflect.markdown.parser import UNDONE, parse_log
from everos_reflect.model import Entry, EntryId, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import ClusteringSettings, LLMSettings, Settings
from everos_reflect.strategies import journal
from everos_reflect.strategies.reflect import NAME, ReflectEpisodes

ANDREW = UserRef.of("u_andrew")

PETS = [
    ("2026-08-02T19:00:00-07:00", "Andrew has no pets",
     "Andrew has no pets: his Denver apartment does not allow a dog."),
    ("2026-09-04T21:10:00-07:00", "Andrew adopted a dog named Toby",
     "Andrew has a pet now: he adopted a dog named Toby, a three-year-old lab mix."),
    ("2026-09-07T10:00:00-07:00", "Andrew adopted a second dog named Buddy",
     "Andrew adopted another dog named Buddy. Andrew now has two dogs, Toby and Buddy."),
]


def make_runtime(
    root: Path,
    llm: LLM,
    *,
    embedder: Embedder | None = None,
    threshold: float = 0.25,
    window_days: float = 60.0,
    max_concurrency: int = 2,
) -> Runtime:
    """A runtime whose clustering groups texts that share a few words (HashEmbedder)."""
    settings = Settings(
        # member_threshold 0: the hash embedder's loose similarities are the grouping wanted
        clustering=ClusteringSettings(threshold=threshold, time_window_days=window_days,
                                      rejoin_threshold=threshold, member_threshold=0.0),
        llm=LLMSettings(max_concurrency=max_concurrency),
    )
    return Runtime(root, settings, embedder=embedder or HashEmbedder(64), llm=llm)


def add_episode(rt: Runtime, ref: UserRef, timestamp: str, subject: str, content: str,
                **meta: Any) -> Entry:
    day = datetime.fromisoformat(timestamp).date()
    values = {"timestamp": timestamp, "parent_type": "memcell", "parent_id": f"mc_{day:%m%d}",
              "session_id": f"sess_{day:%m%d}", **meta}
    return rt.store.append(ref, Kind.EPISODE, values, {"Subject": subject, "Content": content},
                           day=day)


def add_fact(rt: Runtime, ref: UserRef, episode: Entry, text: str) -> Entry:
    day = EntryId.parse(episode.id).day
    return rt.store.append(ref, Kind.ATOMIC_FACT,
                           {"timestamp": episode.meta["timestamp"], "parent_type": "episode",
                            "parent_id": episode.id}, {"Fact": text}, day=day)


def seed_pets(rt: Runtime, ref: UserRef = ANDREW) -> list[Entry]:
    return [add_episode(rt, ref, ts, subject, content) for ts, subject, content in PETS]


def run_reflection(rt: Runtime, run_id: str = "run_test", **settings: Any) -> dict[str, int]:
    """One Reflection run, in-process, with ``settings`` validated as ome.toml would be:
    recovery first, then the run, their counts added up (as the engine does)."""
    values = validate_strategy_settings(NAME, settings, "ome.toml")
    strategy = ReflectEpisodes()
    recovered = strategy.recover(rt)
    counts = strategy.run(RunContext(rt, values, run_id, "manual", force=True))
    for key, value in recovered.items():
        counts[key] = counts.get(key, 0) + value
    return counts


def merge_on(monkeypatch: pytest.MonkeyPatch, day: date) -> None:
    """Merges write their narrative to ``day``, not the day they read off the clock: a test
    that prepares "today's" log, or compares two runs' files, failed when the day turned
    in between."""
    monkeypatch.setattr(journal, "new_plan", partial(journal.new_plan, day=day))


def reports(rt: Runtime) -> list[dict[str, Any]]:
    rows = rt.db().execute("SELECT * FROM reflection_report ORDER BY created_at").fetchall()
    out = []
    for row in rows:
        item = dict(row)
        item["source_members"] = json.loads(item["source_members"])
        out.append(item)
    return out


def all_entries(rt: Runtime, ref: UserRef = ANDREW) -> dict[str, Entry]:
    """Every entry of one user (ids are unique per user), parsed from Markdown; asserts that
    every file of that user parses cleanly."""
    found: dict[str, Entry] = {}
    for path in rt.store.iter_files(ref):
        log = parse_log(path.read_text("utf-8"), str(path))
        assert log.ok and not log.diagnostics, (path, log.diagnostics)
        for entry in log.entries:
            found[entry.id] = entry
    return found


def check_invariants(rt: Runtime, ref: UserRef = ANDREW) -> dict[str, Entry]:
    """SPEC §5 crash-safety invariants over every user's Markdown (every file must parse):
    every archived entry points at an existing entry (or is ``undone``); nothing but its own
    facts points at a withdrawn narrative; every live narrative's sources are archived toward
    it; every undone merge is undone whole (:func:`check_undone`); no journal row is left.
    Returns the entries of ``ref``."""
    for user in rt.store.iter_users():
        entries = all_entries(rt, user)
        withdrawn = {i for i, e in entries.items() if e.deprecated_by == i}
        check_undone(rt, user, entries)
        for entry_id, entry in entries.items():
            target = entry.deprecated_by
            if target is None or target in (entry_id, UNDONE):
                continue
            assert target in entries, f"{user}: {entry_id} archived toward missing {target}"
            if target in withdrawn:  # only the withdrawn narrative's own facts go with it
                assert entry.parent_id == target, f"{entry_id} archived toward withdrawn {target}"
        for entry_id, entry in entries.items():
            if entry.parent_type == "cluster" and entry.deprecated_by is None:
                for source in entry.sources:
                    assert source in entries, (
                        f"{user}: live narrative {entry_id} names source {source}, which is "
                        "in none of the user's logs (deleted, or never written)")
                    assert entries[source].deprecated_by == entry_id, (
                        f"{user}: live narrative {entry_id} but source {source} is "
                        f"{entries[source].deprecated_by or 'live'}")
    left = [row[0] for row in rt.db().execute("SELECT id FROM merge_journal")]
    assert not left, f"journal rows left unsettled: {', '.join(left)}"
    return all_entries(rt, ref)


def check_undone(rt: Runtime, user: UserRef, entries: dict[str, Entry]) -> None:
    """An undone merge is undone whole: its narrative archived ``undone`` in the Markdown and
    the index, and so are its own atomic facts; nothing archived toward it any more (its
    sources and their facts live again, or archived toward a later merge); its audit rows
    ``undone``; no cluster consolidated by it. And the audit marks no merge undone whose
    narrative is still in the logs and not archived ``undone``."""
    undone = {i for i, e in entries.items()
              if e.parent_type == "cluster" and e.deprecated_by == UNDONE}
    for entry_id, entry in entries.items():
        assert entry.deprecated_by not in undone, (
            f"{user}: {entry_id} is archived toward {entry.deprecated_by}, a merge that was "
            "undone: it should live again")
        if entry.kind is Kind.ATOMIC_FACT and entry.parent_id in undone:
            assert entry.deprecated_by == UNDONE, (
                f"{user}: atomic fact {entry_id} of the undone narrative {entry.parent_id} is "
                f"{entry.deprecated_by or 'live'}, not undone")
    who = (user.app, user.project, user.user_id)
    audit: dict[str, set[str]] = {}
    for merged, status in rt.db().execute(
            "SELECT merged_entry_id, status FROM reflection_report WHERE app_id=? AND "
            "project_id=? AND owner_id=? AND merged_entry_id IS NOT NULL", who):
        audit.setdefault(merged, set()).add(status)
    indexed = dict(rt.db().execute(
        "SELECT id, deprecated_by FROM entries WHERE app_id=? AND project_id=? AND user_id=?",
        who).fetchall())
    for narrative in sorted(undone):
        statuses = audit.get(narrative, set()) - {UNDONE}
        assert not statuses, (f"{user}: merge {narrative} was undone but its audit row says "
                              f"{', '.join(sorted(statuses))}")
        assert indexed.get(narrative) == UNDONE, (
            f"{user}: merge {narrative} was undone but the index has it "
            f"{indexed.get(narrative) or 'live'}")
    for entry_id, toward in indexed.items():
        assert toward not in undone, (f"{user}: the index archives {entry_id} toward {toward}, "
                                      "a merge that was undone")
    for narrative, statuses in sorted(audit.items()):  # (an entry that is no merge may
        # stand under its id: the narrative's log replaced by hand, the merge undone since)
        entry = entries.get(narrative)
        if UNDONE in statuses and entry is not None and entry.parent_type == "cluster":
            assert narrative in undone, (
                f"{user}: the audit marks the merge {narrative} undone but it is "
                f"{entries[narrative].deprecated_by or 'live'} in the logs")
    held = rt.db().execute(
        "SELECT cluster_id, consolidated_entry_id FROM clusters WHERE app_id=? AND "
        "project_id=? AND user_id=? AND consolidated_entry_id IS NOT NULL", who).fetchall()
    for cluster, narrative in held:
        assert narrative not in undone, (f"{user}: cluster {cluster} is consolidated by "
                                         f"{narrative}, a merge that was undone")


def index_deprecations(rt: Runtime, ref: UserRef = ANDREW) -> dict[str, str]:
    rows = rt.db().execute(
        "SELECT id, deprecated_by FROM entries WHERE deprecated_by IS NOT NULL AND app_id=? "
        "AND project_id=? AND user_id=?", (ref.app, ref.project, ref.user_id)).fetchall()
    return {r["id"]: r["deprecated_by"] for r in rows}


def replace_log_with_own_episode(rt: Runtime, entry_id: str, *, draft: str | None = None,
                                 ref: UserRef = ANDREW) -> None:
    """A person replaces by hand the episode log holding ``entry_id`` (a narrative, say) with
    one holding an Episode of their own under that id (``draft``: and a draft of it under that
    id, archived toward it by hand)."""
    path = rt.store.path_for_id(ref, entry_id)
    day = path.stem.removeprefix("episode-")
    marks = f"deprecated_entries: {{{draft}: {entry_id}}}\n" if draft else ""
    second = (f"<!-- entry:{draft} -->\n---\nowner_id: {ref.user_id}\n"
              f"timestamp: {day}T08:00:00+00:00\nparent_type: memcell\n---\n## Subject\n"
              f"Draft\n\n## Content\nA draft of the note.\n<!-- /entry:{draft} -->\n"
              if draft else "")
    path.write_text(
        f"---\ntype: episode_daily\nschema_version: 1\nuser_id: {ref.user_id}\n"
        f"date: '{day}'\n{marks}---\n<!-- entry:{entry_id} -->\n---\n"
        f"owner_id: {ref.user_id}\ntimestamp: {day}T09:00:00+00:00\nparent_type: memcell\n"
        f"parent_id: mc_mine\nsession_id: sess_mine\n---\n## Subject\nMy garden\n\n"
        f"## Content\nAndrew planted tomatoes in his garden.\n<!-- /entry:{entry_id} -->\n"
        f"{second}", "utf-8")


class Crash(BaseException):
    """The process dies here (not caught by a run's ``except Exception``)."""


def crash_run_at(monkeypatch: pytest.MonkeyPatch, rt: Runtime, step: str) -> None:
    """Run Reflection and let the process "die" right after ``step`` of the merge (the
    journal's ``checkpoint`` seam); the seam is a no-op again afterwards."""

    def crash_at(reached: str) -> None:
        if reached == step:
            raise Crash(reached)

    monkeypatch.setattr(journal, "checkpoint", crash_at)
    with pytest.raises(Crash):
        run_reflection(rt)
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
