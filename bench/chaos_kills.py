"""The kill section of the chaos harness: SIGKILLs aimed inside each operation's interesting
window, and where each one landed.

A kill at a blind random delay mostly lands in interpreter start-up or after the work is done
(session 1's recovery kills seldom found a journal row). So every kill here is *aimed*:

- **Reflection**: new episodes are written first (so the run has a merge to commit); the kill
  either waits for the product's own record of progress — a ``merge_journal`` row reaching a
  chosen step (``planned`` … ``deprecated``), polled read-only every few milliseconds — or
  falls at a random point of the measured run time (select, cluster, LLM);
- **recovery**: an aimed Reflection kill leaves a journal row; sometimes a source is then
  edited by hand (so recovery must withdraw the merge: the ``abandoning`` step); then the
  command that recovers it (``reindex``, ``trigger``, ``add``, ``serve``) is killed when the row
  moves to a later step, or at a random point;
- **add**, **undo**, **reindex**, **watcher sync**: at a random point of the operation's
  measured duration (the watcher: of the time from a hand-written file to its indexing);
- **copy** (not a kill): a user's folder copied by hand into a new user's (its ``owner_id``
  and ``user_id`` rewritten) while a Reflection run commits a merge of theirs, as soon as the
  journal reaches a chosen step (``narrative``, ``facts``, ``archiving``): the copy is taken
  half done, and the run must settle it before its row goes (the invariants then hold for the
  copy's user as for every other); the **recovery** kills copy the folder so in the crash
  window too, now and then;
- **provenance** (the derived tier): an insight citing two Episodes and a lesson citing a task
  are written as the tiers write them, a cited Episode and the task are edited by hand, then a
  ``search`` (whose scan makes both stale) is killed as soon as the index marks the Episode's
  log synced, or at a random point; after the next ``search``, both records' status and the
  lesson's audit rows must be those a copy of the root scanned by an unkilled process gets.

Where each kill landed is read back from the root after the process died (journal rows left,
whether the text reached Markdown or the index, whether the undo's patches were written), not
from the aim, and counted per operation and phase.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import chaos_corpus
import chaos_reader
from chaos_servers import EXE, REPO, run, wait_until

USERS = ["u_ana", "u_ben", "u_cy"]
TOPICS = [
    "Ana trains for the city marathon with long runs on Sunday mornings",
    "Ben plans a trip to Lisbon and books flights hotels and a tram tour",
    "Cy adopts a rescue dog named Pepper and walks her in the park",
    "The team migrates the billing service database to Postgres",
]
REFLECT = "reflect_episodes"
OPS = ["reflect", "recovery", "add", "undo", "watcher", "reindex", "provenance", "copy"]
#: Each operation's row in the report, named for what it does: a SIGKILL during it, but for
#: ``copy``, where nothing is killed (a folder copied while a run commits; the run goes on)
CASES = {**{op: f"SIGKILL during {op}" for op in OPS},
         "copy": "folder copied mid-commit (no kill)"}
#: Journal steps of a commit, in order (journal.py); ``abandoning`` only on a withdrawal.
STEPS = ["planned", "narrative", "facts", "archiving", "deprecated"]
RANK = {**{s: i for i, s in enumerate(STEPS)}, "abandoning": len(STEPS)}
#: Un-killed durations (seconds) used when they are not measured (the CI's short run).
DEFAULT_WINDOWS = {"reindex": 4.0, "reflect": 6.0, "add": 2.0, "undo": 2.5, "watcher": 2.0,
                   "search": 2.0}
#: The poll interval of an aimed kill (seconds).
POLL = 0.002


def user_rel(user: str) -> str:
    return f"{chaos_corpus.APP}/{chaos_corpus.PROJECT}/users/{user}"


def base_args(root: Path, user: str) -> list[str]:
    return ["--root", str(root), "--user", user, "--app", chaos_corpus.APP,
            "--project", chaos_corpus.PROJECT]


def seed_root(root: Path, env: dict[str, str], per_topic: int = 3) -> None:
    """A fresh root with every user writing a few episodes on a few topics (written as a person
    would, straight into the daily logs), then indexed."""
    done = run(["init", str(root)], env)
    assert done.returncode == 0, done.stderr
    day0 = date(2026, 6, 1)
    for u, user in enumerate(USERS):
        for t in range(per_topic):
            day = day0 + timedelta(days=t)
            texts = [f"{TOPICS[(u + k) % len(TOPICS)]} (note {t}.{k})." for k in range(2)]
            write_log(root, user, day, texts)
    done = run(["reindex", "--root", str(root)], env)
    assert done.returncode == 0, done.stderr


def write_log(root: Path, user: str, day: date, texts: list[str]) -> Path:
    """A new daily log written by hand (never over an existing one: nothing may be lost)."""
    folder = root / user_rel(user) / "episodes"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"episode-{day.isoformat()}.md"
    assert not path.exists(), path
    path.write_text(chaos_corpus.valid_log(user, day, texts))
    return path


def settle(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The next start: a Reflection run recovers the journal, syncs the index, merges."""
    return run(["trigger", REFLECT, "--force", "--root", str(root), "--timeout", "600"], env,
               timeout=900)


# --------------------------------------------------------------------------- probes


class Journal:
    """The product's own record of merges in flight, read-only (never blocks the writer)."""

    def __init__(self, root: Path) -> None:
        self.db = root / ".index" / "sqlite" / "system.db"

    def rows(self) -> list[tuple[str, str, str]]:
        """(journal id, step, plan JSON) of every row, oldest first; [] when unreadable."""
        if not self.db.exists():
            return []
        try:
            conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=1.0)
        except sqlite3.Error:
            return []
        try:
            return list(conn.execute("SELECT id, step, plan FROM merge_journal "
                                     "ORDER BY created_at, id"))
        except sqlite3.Error:
            return []
        finally:
            conn.close()

    def steps(self) -> list[str]:
        return [step for _, step, _ in self.rows()]

    def reached(self, target: str, *, beyond: str | None = None) -> bool:
        """Some row is at ``target`` or a later step (and later than ``beyond``)."""
        floor = RANK[beyond] if beyond else -1
        return any(RANK.get(s, -1) >= RANK[target] and RANK.get(s, -1) > floor
                   for s in self.steps())


def index_count(root: Path, needle: str) -> int:
    """Index rows whose text holds ``needle`` (-1 when the index cannot be read)."""
    db = root / ".index" / "sqlite" / "system.db"
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
        try:
            return conn.execute("SELECT COUNT(*) FROM entries WHERE text LIKE ?",
                                (f"%{needle}%",)).fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return -1


def markdown_has(root: Path, needle: str) -> bool:
    return any(needle in p.read_text(errors="replace") for p in root.rglob("*.md")
               if ".index" not in p.parts)


def aimed(args: list[str], env: dict[str, str], *, delay: float | None = None,
          probe: Callable[[], bool] | None = None, limit: float = 120.0) -> str:
    """Run ``everos-reflect ARGS`` and SIGKILL it after ``delay`` seconds, or as soon as
    ``probe()`` is true (polled every few ms), or at ``limit``. Returns ``killed`` or
    ``finished`` (it exited first)."""
    proc = subprocess.Popen([*EXE, *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=REPO)
    started = time.monotonic()
    deadline = started + (delay if delay is not None else limit)
    while True:
        if proc.poll() is not None:
            return "finished"
        if time.monotonic() >= deadline or (probe is not None and probe()):
            proc.kill()
            proc.wait()
            return "killed"
        time.sleep(POLL)


#: Writes one insight citing the two Episodes the bench just wrote and one lesson citing a
#: new task, as the derived tiers write them (``derivation``, ``evidence_hash``), with the
#: product's own Markdown store: the bench's reader never imports the product, so a child
#: does it.
SEED_DERIVED = r"""
import json, sys
from datetime import date
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Kind, UserRef
from everos_reflect.procedural.tasks import new_task, task_hash

root, app, project, user, tag = sys.argv[1:6]
store, ref = MarkdownStore(root), UserRef(app, project, user)
eps = [e for e in store.entries(ref, Kind.EPISODE)  # the two the bench just wrote
       if e.deprecated_by is None and f"(cited {sys.argv[6]}." in e.content]
task = new_task(ref, task_type="deploy", goal=f"Deploy the web service ({tag})",
                steps=["check logs", "deploy"], outcome="success",
                timestamp="2026-06-01T10:00:00+00:00")
task = store.append(ref, Kind.TASK, task.meta, task.sections, day=task.day)
stamp, day = "2026-06-02T09:00:00+00:00", date(2026, 6, 2)
insight = store.append(ref, Kind.INSIGHT, {
    "timestamp": stamp, "evidence": [e.id for e in eps], "depth": 1, "importance": 5,
    "question": "q?", "status": "active", "insight_type": "reflection",
    "derivation": f"dw_{tag}", "evidence_hash": {e.id: e.text_hash for e in eps}},
    {"Insight": f"A pattern across two notes ({tag})."}, day=day)
lesson = store.append(ref, Kind.LESSON, {
    "timestamp": stamp, "task_type": "deploy", "lesson_type": "do", "evidence": [task.id],
    "confirmations": 1, "created_by": "learn_lessons", "depth": 1, "status": "active",
    "derivation": f"ll_{tag}", "evidence_hash": {task.id: task_hash(task)}},
    {"Lesson": f"Check the logs before deploying ({tag})."}, day=day)
print(json.dumps({"episode": eps[-1].id, "task": task.id, "insight": insight.id,
                  "lesson": lesson.id}))
"""


def find_block(user_dir: Path, entry_id: str) -> tuple[Path, int, int] | None:
    """(log, start, end) of ``entry_id``'s block in its user's Markdown, markers included."""
    opening, closing = f"<!-- entry:{entry_id} -->", f"<!-- /entry:{entry_id} -->"
    for path in sorted(user_dir.rglob("*.md")):
        text = path.read_text(errors="replace")
        start = text.find(opening)
        if start >= 0:
            return path, start, text.index(closing, start) + len(closing)
    return None


def edit_block(user_dir: Path, entry_id: str, old: str, new: str) -> Path:
    """Replace ``old`` by ``new`` inside ``entry_id``'s block, by hand."""
    found = find_block(user_dir, entry_id)
    assert found is not None, entry_id
    path, start, end = found
    text = path.read_text()
    block = text[start:end]
    assert old in block, (entry_id, old)
    path.write_text(text[:start] + block.replace(old, new, 1) + text[end:])
    return path


def derived_state(root: Path, user_dir: Path, ids: list[str]) -> dict[str, Any]:
    """Each record's (status, stale_reason), read by the independent reader, and the
    ``provenance`` audit rows naming it (statuses, in order)."""
    out: dict[str, Any] = {}
    for entry_id in ids:
        found = find_block(user_dir, entry_id)
        meta: dict[str, Any] = {}
        if found is not None:
            kind = "lesson" if entry_id.startswith("ls_") else "insight"
            _, entries = chaos_reader.read_log(found[0].read_bytes(), kind)
            meta = next((e.meta for e in entries if e.id == entry_id), {})
        rows = chaos_reader._query(
            root, "SELECT status FROM derivation_report WHERE strategy = 'provenance' AND "
            f"outputs LIKE '%{entry_id}%' ORDER BY created_at",
            tolerate_missing_table=True) or []
        out[entry_id] = (meta.get("status"), meta.get("stale_reason"), [r[0] for r in rows])
    return out


def _file_sha(root: Path, rel: str) -> str | None:
    rows = chaos_reader._query(root, f"SELECT sha256 FROM files WHERE path = '{rel}'",
                              tolerate_missing_table=True)
    return rows[0][0] if rows else None


# --------------------------------------------------------------------------- one kill


@dataclass
class Kills:
    """The section's state: the root, what must survive, timings and landing counts."""

    root: Path
    env: dict[str, str]
    rng: random.Random
    times: dict[str, float]
    expected: dict[tuple[str, str], str] = field(default_factory=dict)
    landed: Counter = field(default_factory=Counter)  # (op, phase) -> kills
    #: provenance kills whose derived records differ from an unkilled run's (cleared per kill)
    derived: list[str] = field(default_factory=list)
    recoverers: Counter = field(default_factory=Counter)  # command killed while recovering
    #: copies a run left half done, read as soon as it exited (cleared per kill): the next
    #: start's Reflection run may merge such a copy again, which the invariants then miss
    half_copies: list[str] = field(default_factory=list)
    #: copies that outlived their merge's row (cleared per kill): nothing of the run that
    #: committed it could settle them; the next start must (read after it)
    outlived: list[str] = field(default_factory=list)
    next_day: date = date(2026, 7, 1)

    def feed(self, i: int, n: int = 3) -> str:
        """``n`` new episodes on one topic for one user, by hand: Reflection has a merge."""
        user, topic = self.rng.choice(USERS), self.rng.choice(TOPICS)
        marker = f"fed {i}"
        write_log(self.root, user, self.next_day,
                  [f"{topic} ({marker}.{k})." for k in range(n)])
        self.next_day += timedelta(days=1)
        return marker

    def reflect_once(self, i: int) -> str:
        """One aimed Reflection kill. Returns where it landed."""
        self.feed(i)
        journal = Journal(self.root)
        args = ["trigger", REFLECT, "--force", "--root", str(self.root)]
        if self.rng.random() < 0.25:  # select, cluster, LLM: a random point of the run
            aim = "timed"
            outcome = aimed(args, self.env, delay=self.rng.uniform(0.2, self.times["reflect"]))
        else:
            target = self.rng.choice(STEPS)
            aim = f"aimed at {target}"
            outcome = aimed(args, self.env, probe=lambda: journal.reached(target),
                            limit=self.times["reflect"] * 3)
        steps = journal.steps()
        if outcome == "finished":
            return f"{aim}: finished first"
        return f"{aim}: killed with the journal at {'+'.join(steps)}" if steps else \
            f"{aim}: killed with no journal row"

    def recovery_once(self, i: int) -> str:
        """Leave an interrupted merge, maybe edit a source, kill the command recovering it."""
        journal = Journal(self.root)
        for attempt in range(4):
            self.reflect_once(i * 10 + attempt)
            if journal.rows():
                break
        rows = journal.rows()
        if not rows:
            return "no journal row to recover"
        _, step, plan = rows[0]
        edited = ""
        if RANK[step] < RANK["archiving"] and self.rng.random() < 0.4:
            edited = self.edit_source(json.loads(plan))
        copied = ""
        if self.rng.random() < 0.3:  # the folder copied by hand in the crash window
            copied = self.copy_user(json.loads(plan)["user_id"], f"u_copy{i}")
        user = self.rng.choice(USERS)
        port = str(_free_port())
        recoverer = self.rng.choice([
            ["reindex", "--root", str(self.root)],
            ["trigger", REFLECT, "--force", "--root", str(self.root)],
            ["add", *base_args(self.root, user), "--subject", f"r {i}", "--content",
             f"{self.rng.choice(TOPICS)} (recovering {i})."],
            ["serve", "--root", str(self.root), "--port", port],
        ])
        if step == "deprecated" or self.rng.random() < 0.25:
            aim = "timed"
            outcome = aimed(recoverer, self.env, delay=self.rng.uniform(0.2, self.times["add"]))
        else:
            later = [s for s in STEPS if RANK[s] > RANK[step]]
            target = "abandoning" if edited else self.rng.choice(later)
            aim = f"aimed at {target}"
            outcome = aimed(recoverer, self.env,
                            probe=lambda: journal.reached(target, beyond=step),
                            limit=self.times["reflect"] * 2)
        after = journal.steps()
        self.recoverers[recoverer[0]] += 1
        how = (f"row at {step}{', a source edited' if edited else ''}"
               f"{', the folder copied' if copied else ''}, {aim}")
        if recoverer[0] == "serve" and outcome == "finished":
            return f"{how}: serve exited"
        if not after:
            return f"{how}: recovered before the kill"
        return f"{how}: killed at {'+'.join(after)}"

    def copy_user(self, user: str, new: str, *,
                  early: dict[Path, bytes | None] | None = None) -> str:
        """The user's folder copied by hand into ``new``'s, made ``new``'s (every ``owner_id``
        and ``user_id`` rewritten). ``early``: logs (relative to the folder) the copy took
        earlier, as they were then (``None``: not there yet). Returns ``new``."""
        source, target = self.root / user_rel(user), self.root / user_rel(new)
        # the product's temp files (``.<log>.<hex>.tmp``) left out: listed, one renamed into
        # its log before it was copied stopped the whole harness (copytree's Error)
        shutil.copytree(source, target, ignore=shutil.ignore_patterns(".*.tmp"))
        for rel, data in (early or {}).items():
            if data is None:
                (target / rel).unlink(missing_ok=True)
            else:
                (target / rel).write_bytes(data)
        for log in target.rglob("*.md"):
            text = log.read_text(errors="replace")
            log.write_text(text.replace(f"owner_id: {user}\n", f"owner_id: {new}\n")
                           .replace(f"user_id: {user}\n", f"user_id: {new}\n"))
        return new

    def copy_once(self, i: int) -> str:
        """A user's folder copied while a Reflection run commits a merge of theirs (not
        killed): as soon as the journal reaches the aimed step, the folder is copied into a
        new user's; the run goes on and must leave the copy settled. Half the time the copy
        spans several writes of the commit (a copy of a big folder is no instant): the merge
        day's logs are taken as soon as a row is there, the rest once a row is archived
        (``deprecated``); a copy that outlived the row (the merge was over before the copy
        was: nothing of that run could settle it) must be settled by the next start, and is
        read after it (until session 51 nothing settled it, and it was removed uncounted)."""
        self.feed(i)
        journal = Journal(self.root)
        split = self.rng.random() < 0.5
        target = "deprecated" if split else self.rng.choice(["narrative", "facts", "archiving"])
        proc = subprocess.Popen([*EXE, "trigger", REFLECT, "--force", "--root", str(self.root)],
                                env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=REPO)
        deadline = time.monotonic() + self.times["reflect"] * 3
        rows: list[tuple[str, str, str]] = []
        early: dict[Path, bytes | None] | None = None  # a split copy's first part
        while proc.poll() is None and time.monotonic() < deadline:
            if split and early is None and (first := journal.rows()):
                early = self.day_logs(json.loads(first[0][2]))
            rows = [r for r in journal.rows() if RANK.get(r[1], -1) >= RANK[target]]
            if rows and (not split or early is not None):
                break
            time.sleep(POLL)
        where = f"{'split, ' if split else ''}aimed at {target}: "
        copy = ""
        if rows:
            plan = json.loads(rows[0][2])
            copy = self.copy_user(plan["user_id"], f"u_copy{i}", early=early)
            where += f"copied with the journal at {rows[0][1]}"
            if split and rows[0][0] not in {r[0] for r in journal.rows()}:
                self.outlived.append(user_rel(copy))  # settled by the next start
                copy, where = "", where + ", the merge over before the copy"
        else:
            where += "the run finished first"
        proc.wait(timeout=600)
        if copy:  # as the run left it, before the next start's run looks at it
            rel = user_rel(copy)
            self.half_copies += chaos_reader.half_done(
                rel, chaos_reader.read_user(self.root / rel)[0])
        return where

    def day_logs(self, plan: dict) -> dict[Path, bytes | None]:
        """The episode and fact logs of a merge's day, as they are now (``None``: not there),
        by their path relative to the user's folder."""
        folder = self.root / user_rel(plan["user_id"])
        found: dict[Path, bytes | None] = {}
        for kind_dir, stem in chaos_reader.KIND_DIRS.items():
            rel = Path(kind_dir) / f"{stem}-{plan['day']}.md"
            found[rel] = (folder / rel).read_bytes() if (folder / rel).exists() else None
        return found

    def edit_source(self, plan: dict) -> str:
        """A person edits one of the merge's sources in the crash window: recovery must
        withdraw the merge (the text they wrote stays, and must survive)."""
        for source in plan.get("hashes", {}):
            folder = self.root / user_rel(plan["user_id"]) / "episodes"
            for path in sorted(folder.glob("*.md")):
                text = path.read_text()
                start = text.find(f"<!-- entry:{source} -->")
                if start < 0:
                    continue
                close = text.find(f"<!-- /entry:{source} -->", start)
                path.write_text(text[:close].rstrip("\n") + " (edited by hand)\n"
                                + text[close:])
                return source
        return ""

    def add_once(self, i: int) -> str:
        """Killed at a random point of its measured time (biased to the end, where it writes),
        or as soon as the day's log changes on disk (inside or just after the append)."""
        user = self.rng.choice(USERS)
        marker = f"(kill {i})"
        content = f"{self.rng.choice(TOPICS)} {marker}."
        args = ["add", *base_args(self.root, user), "--subject", f"kill {i}", "--content",
                content, "--json"]
        folder = self.root / user_rel(user) / "episodes"
        before = _stats(folder)
        proc = subprocess.Popen([*EXE, *args], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, cwd=REPO)
        if self.rng.random() < 0.5:
            aim = "timed"
            deadline = time.monotonic() + self.rng.uniform(0.5, 1.05) * self.times["add"]
            probe = None
        else:
            aim = "aimed at the log changing"
            deadline = time.monotonic() + self.times["add"] * 3
            probe = lambda: _stats(folder) != before  # noqa: E731
        while proc.poll() is None and time.monotonic() < deadline \
                and not (probe is not None and probe()):
            time.sleep(POLL)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
            written = markdown_has(self.root, marker)
            return f"{aim}: killed after the Markdown write" if written else \
                f"{aim}: killed before the Markdown write"
        out, _ = proc.communicate()
        if proc.returncode == 0:  # acknowledged: this text must never be lost
            self.expected[(user_rel(user), json.loads(out)["id"])] = content
        return f"{aim}: finished first (exit {proc.returncode})"

    def watcher_once(self, i: int) -> str:
        """A hand-written log while ``serve`` runs; killed while its watcher syncs it."""
        port = _free_port()
        proc = subprocess.Popen([*EXE, "serve", "--root", str(self.root), "--port", str(port)],
                                env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=REPO)
        try:
            if not wait_until(lambda: _healthy(port), 120, step=0.05):
                return "serve never became healthy"
            marker = self.feed(i)
            time.sleep(self.rng.uniform(0.0, self.times["watcher"] * 1.2))
            alive = proc.poll() is None
        finally:
            proc.kill()
            proc.wait()
        indexed = index_count(self.root, marker)
        if not alive:
            return "serve had exited"
        return "killed after the watcher indexed it" if indexed >= 3 else \
            "killed before the watcher indexed it" if indexed == 0 else \
            "killed while the watcher indexed it"

    def reindex_once(self, i: int) -> str:
        fraction = self.rng.random()
        outcome = aimed(["reindex", "--root", str(self.root)], self.env,
                        delay=0.1 + fraction * self.times["reindex"])
        if outcome == "finished":
            return "finished first"
        return f"killed in quarter {min(int(fraction * 4), 3) + 1} of its measured time"

    def provenance_once(self, i: int) -> str:
        """Derived records whose evidence is edited by hand; the scan that makes them stale
        killed as soon as it marks the edited log synced (the window between the index's
        write and the change subscribers), or at a random point of its measured time."""
        user = self.rng.choice(USERS)
        udir = self.root / user_rel(user)
        write_log(self.root, user, self.next_day,  # the Episodes the insight cites
                  [f"{self.rng.choice(TOPICS)} (cited {i}.{k})." for k in range(2)])
        self.next_day += timedelta(days=1)
        seeded = subprocess.run(
            [sys.executable, "-c", SEED_DERIVED, str(self.root), chaos_corpus.APP,
             chaos_corpus.PROJECT, user, f"chaos {i}", str(i)], env=self.env, cwd=REPO,
            capture_output=True, text=True, timeout=120)
        if seeded.returncode != 0:
            self.derived.append(f"#{i} seeding failed: {seeded.stderr.strip()[-300:]}")
            return "seeding failed"
        ids = json.loads(seeded.stdout)
        search = ["search", *base_args(self.root, user), "deploy the web service"]
        run(search, self.env)  # indexed, checked: both records active
        log = edit_block(udir, ids["episode"], f"<!-- /entry:{ids['episode']} -->",
                         f"(edited by hand {i})\n<!-- /entry:{ids['episode']} -->")
        edit_block(udir, ids["task"], "outcome: success", "outcome: failure")
        twin = self.root.parent / f"{self.root.name}-twin"
        shutil.rmtree(twin, ignore_errors=True)
        shutil.copytree(self.root, twin, symlinks=True)
        rel = log.relative_to(self.root).as_posix()
        before = _file_sha(self.root, rel)
        if self.rng.random() < 0.3:
            aim = "timed"
            outcome = aimed(search, self.env,
                            delay=self.rng.uniform(0.2, 1.05) * self.times["search"])
        else:
            aim = "aimed at the log marked synced"
            outcome = aimed(search, self.env, limit=self.times["search"] * 3,
                            probe=lambda: _file_sha(self.root, rel) not in (before, None))
        derived = [ids["insight"], ids["lesson"]]
        at_kill = derived_state(self.root, udir, derived)
        synced = _file_sha(self.root, rel) != before
        run(search, self.env)  # the next start
        twin_search = ["search", *base_args(twin, user), "deploy the web service"]
        run(twin_search, self.env)
        got = derived_state(self.root, udir, derived)
        want = derived_state(twin, twin / user_rel(user), derived)
        shutil.rmtree(twin, ignore_errors=True)
        if got != want:
            self.derived.append(f"#{i} {user}: after a killed scan {got}, unkilled {want}")
        elif any(status != "stale" for status, _, _ in want.values()):  # nothing was compared
            self.derived.append(f"#{i} {user}: an unkilled scan left them {want}")
        if outcome == "finished":
            return f"{aim}: finished first"
        marked = sum(status == "stale" for status, _, _ in at_kill.values())
        if not synced:
            return f"{aim}: killed before the log was marked synced"
        return f"{aim}: killed after the sync, " + (
            "before any stale mark" if not marked else
            f"with {marked} of 2 records marked")

    def undo_once(self, i: int) -> str:
        """Killed at a random point of its measured time, or as soon as its first frontmatter
        patch reaches the disk (the window between restoring sources and archiving)."""
        merged = chaos_reader.live_narratives(self.root)
        if not merged:
            return "nothing merged to undo"
        owner, narrative = self.rng.choice(merged)
        pointing_before = _pointing(self.root, owner, narrative)
        args = ["undo", narrative, *base_args(self.root, owner)[2:], "--root", str(self.root)]
        if self.rng.random() < 0.5:
            aim = "timed"
            outcome = aimed(args, self.env,
                            delay=self.rng.uniform(0.3, 1.05) * self.times["undo"])
        else:
            aim = "aimed at the first patch"
            folder = self.root / user_rel(owner)
            before = _stats(folder / "episodes") + _stats(folder / ".atomic_facts")
            outcome = aimed(args, self.env, limit=self.times["undo"] * 3,
                            probe=lambda: _stats(folder / "episodes")
                            + _stats(folder / ".atomic_facts") != before)
        if outcome == "finished":
            return f"{aim}: finished first"
        user, _ = chaos_reader.read_user(self.root / user_rel(owner))
        entry = user.entries.get(narrative)
        pointing = _pointing(self.root, owner, narrative)
        if entry is not None and not entry.live:
            return f"{aim}: killed after archiving the narrative"
        if pointing == pointing_before:
            return f"{aim}: killed before restoring any source"
        return f"{aim}: killed with some sources restored" if pointing else \
            f"{aim}: killed after restoring the sources, before archiving the narrative"


def _pointing(root: Path, owner: str, narrative: str) -> int:
    """How many entries are archived toward ``narrative`` (the independent reader's view)."""
    user, _ = chaos_reader.read_user(root / user_rel(owner))
    return sum(1 for e in user.entries.values() if e.deprecated_by == narrative)


def _stats(folder: Path) -> list[tuple[str, int, int]]:
    """(name, size, mtime ns) of a folder's daily logs: a cheap "did a log change" probe (lock
    and temporary files do not count)."""
    try:
        return sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns)
                      for e in os.scandir(folder) if e.is_file() and e.name.endswith(".md"))
    except OSError:
        return []


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(port: int) -> bool:
    import httpx

    try:
        return httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


# --------------------------------------------------------------------------- timing


def measure(kills: Kills) -> dict[str, float]:
    """How long each killed operation takes un-killed here, so kill times fall inside it."""
    root, env = kills.root, kills.env
    out: dict[str, float] = {}

    def timed(name: str, args: list[str]) -> None:
        started = time.perf_counter()
        run(args, env)
        out[name] = time.perf_counter() - started

    timed("reindex", ["reindex", "--root", str(root)])
    timed("search", ["search", *base_args(root, USERS[0]), "deploy the web service"])
    kills.feed(-1)
    timed("reflect", ["trigger", REFLECT, "--force", "--root", str(root)])
    timed("add", ["add", *base_args(root, USERS[0]), "--subject", "timing", "--content",
                  f"{TOPICS[0]} (timing)."])
    merged = chaos_reader.live_narratives(root)
    if merged:
        owner, narrative = merged[0]
        timed("undo", ["undo", narrative, *base_args(root, owner)[2:], "--root", str(root)])
    else:
        out["undo"] = DEFAULT_WINDOWS["undo"]
    port = _free_port()
    proc = subprocess.Popen([*EXE, "serve", "--root", str(root), "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    try:
        wait_until(lambda: _healthy(port), 120, step=0.05)
        marker = kills.feed(-2)
        started = time.perf_counter()
        wait_until(lambda: index_count(root, marker) >= 3, 60, step=0.02)
        out["watcher"] = time.perf_counter() - started
    finally:
        proc.kill()
        proc.wait()
    settle(root, env)
    return out


def run_section(root: Path, env: dict[str, str], template: Path, *, n: int, seed: int,
                measure_windows: bool, budget_s: float,
                on_kill: Callable[[int, str, str, chaos_reader.Violations, str], None],
                ops: list[str] | None = None) -> tuple[Kills, int]:
    """Copy the seeded ``template`` to ``root``, then ``n`` kills (each operation once first,
    then at random), each followed by the next start and the invariant checks; ``on_kill``
    gets each result. Stops starting kills after ``budget_s`` seconds. ``ops``: only these
    operations (default: every one of :data:`OPS`). Returns the state and how many kills ran."""
    ops = ops or OPS
    shutil.copytree(template, root, symlinks=True)
    rng = random.Random(seed)
    kills = Kills(root, env, rng, dict(DEFAULT_WINDOWS))
    if measure_windows:
        kills.times = measure(kills)
    kills.expected = chaos_reader.snapshot(root)
    handlers = {"reflect": kills.reflect_once, "recovery": kills.recovery_once,
                "add": kills.add_once, "undo": kills.undo_once,
                "watcher": kills.watcher_once, "reindex": kills.reindex_once,
                "provenance": kills.provenance_once, "copy": kills.copy_once}
    started = time.monotonic()
    done = 0
    for i in range(n):
        if time.monotonic() - started > budget_s:
            break
        op = ops[i % len(ops)] if i < len(ops) else rng.choice(ops)
        where = handlers[op](i)
        kills.landed[(op, where)] += 1
        finished = settle(root, env)
        found = chaos_reader.check_root(root, kills.expected)
        found.derived += kills.derived
        kills.derived.clear()
        found.live_beside += kills.half_copies
        kills.half_copies.clear()
        for rel in kills.outlived:  # the next start had to settle it
            found.live_beside += chaos_reader.half_done(
                rel, chaos_reader.read_user(root / rel)[0])
        kills.outlived.clear()
        left = Journal(root).steps()
        if left:
            found.unparseable.append(f"journal rows left after the next start: {left}")
        settled = ""
        if finished.returncode not in (0, 3):
            settled = f"settling run exited {finished.returncode}: " \
                      f"{finished.stderr.strip()[-300:]}"
            found.unparseable.append(settled)
        on_kill(i, op, where, found, settled)
        kills.expected.update(chaos_reader.snapshot(root))  # everything seen must stay
        done += 1
    return kills, done
