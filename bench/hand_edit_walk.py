"""Random walks of hand edits against a ``reindex`` of a copy: after every step the live
cluster tables must equal those a rebuild of the same Markdown makes.

A step is one of: add an Episode, archive one by hand (``deprecated_entries``), revive one
(its key removed), delete one, edit one's text, move a log to another user's folder, copy
one there, rename a user folder, run Reflection, undo a merge, write a narrative by hand
(``--narrate``: naming a cluster its user has, else one of another user), make a narrative a
plain Episode (``--unparent``: its ``parent_type``/``parent_id`` lines taken out), and with
``--files`` edits of files and ids (a log renamed to another date, an entry cut into another
log of its user, a whole log deleted and later restored, an entry's id edited, an archive mark
taken out or pointed at another narrative, an entry's block pasted again with its id, a
timestamp moved). The Markdown is
then synced as the watcher or a scan would (the touched paths in one flush, or split over
two, or a scan). The first walk that differs prints its seed, its steps and the differing
rows, and the script exits 1.

    .venv/bin/python bench/hand_edit_walk.py --walks 200 --steps 12 [--seed 0] [--minutes 30]
        [--reflect 2]   (the weight of a Reflection run among the 17 kinds of step: 8 for more)
        [--narrate 0]   (the weight of a narrative written by hand: 0, the walks as before)
        [--unparent 0]  (the weight of a narrative made a plain Episode: 0, the walks as before)
        [--fresh]       (a narrative by hand may also name a cluster id no cluster holds, or
                         a parent_id that is not a cluster id; off: the walks of a seed as before)
        [--files 0]     (the weight of each edit of a file or an id: 0, the walks as before)
        [--together 1]  (up to this many edits before one sync of all they touched: 1, the
                         walks as before)
        [--undo 1]      (the weight of an undo among the steps: 1, the walks as before)
        [--killed]      (a sync may be killed before it tells clustering, the next scan
                         handing the changes over: off, the walks as before)
        [--no-merging]  (a Reflection step runs on what the walk left, as before session 51:
                         most such runs merged nothing, e.g. 305 of 344 for seed 54300)
        [--undo-killed] (an undo may be killed at one of its writes, or its cascade's
                         take-back at one of its steps; the next start recovers it at once:
                         off, the walks as before)
        [--undo-pasted] (a cascading undo may meet an id pasted twice by hand into a log of
                         the earlier merge as it begins that undo: refused, the later undos
                         are taken back; off, the walks as before)

A Reflection step first writes two Episodes of one topic for one user, an hour apart (and
syncs them), so that most runs merge something (an init merge, or an update of the topic's
narrative): merges, undos and hand edits then interleave, which the walks rarely did. An undo
then also picks among the narratives a later merge folded in (the undo cascades).

The last lines count the steps made, by kind (a step that found nothing to do is not made;
one that ran and left every log as it was is counted apart, as "<kind> (no-op)", and marked
so where the steps are printed), then what the walks exercised: Reflection steps and those
that merged, the merges, the undos done (and the later merges they cascaded to), and the
hand edits that changed a log.

Known and documented differences are not checked (clustering/service.py): an Episode out of
time order, or a member deleted or edited away, leaves later Episodes where they joined until
``recluster``; after such a step (edit, delete, archive, move, rename) a difference that leaves
every narrative, consolidated cluster and history row as rebuilt is counted, the live clusters
are rebuilt (``recluster``, as a user would) and the walk goes on (``--strict`` reports it).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from everos_reflect.clustering.service import ClusterService
from everos_reflect.errors import EverosError
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.markdown import settling
from everos_reflect.model import Kind, UserRef
from everos_reflect.strategies import journal, undo
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import make_runtime, run_reflection
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

TOPICS = [
    ("Andrew's dogs", "Andrew adopted a dog named Toby, then Buddy; he walks both dogs."),
    ("Andrew's dogs", "Andrew now has two dogs, Toby and Buddy, and a new dog walker."),
    ("Tax filing", "Quarterly tax filing reminder for the accountant meeting on Friday."),
    ("Tax filing", "The quarterly tax filing was sent after the accountant meeting."),
    ("Marathon", "Andrew trains for the city marathon, running long miles on Sundays."),
    ("Marathon", "Andrew finished the marathon training block and tapers this week."),
]
USERS = ["u_andrew", "u_bob", "u_cy"]


class Walk:
    def __init__(self, root: Path, rng: random.Random, reflect: int = 2,
                 narrate: int = 0, fresh: bool = False, unparent: int = 0,
                 files: int = 0, undo: int = 1, killed: bool = False,
                 merging: bool = False, undo_killed: bool = False,
                 undo_pasted: bool = False) -> None:
        self.root, self.rng = root, rng
        #: a Reflection step first writes two Episodes that cluster (:meth:`feed`)
        self.merging = merging
        #: what the walk exercised: Reflection steps, those that merged, merges, undos done
        #: and the later merges they cascaded to
        self.exercised: Counter[str] = Counter()
        self.undo = undo  # "undo" entries: one among the 17, the rest after FILE_EDITS
        self.killed = killed  # a sync may be killed before it tells clustering
        self.undo_killed = undo_killed  # an undo (or its take-back) may be killed mid-way
        self.undo_pasted = undo_pasted  # a cascade may meet an id pasted twice mid-way
        #: what a start's recovery left in the journal after a killed undo (a finding)
        self.left: list[str] = []
        self.reflect = reflect  # "reflect" entries among the 17 ops (2: one step in 8.5)
        self.narrate = narrate  # "narrate" entries, after the others
        self.fresh = fresh  # a narrative may name an id no cluster holds, or no cluster id
        self.unparent = unparent  # "unparent" entries, after the "narrate" ones
        self.files = files  # each of FILE_EDITS' entries, after the "unparent" ones
        #: logs deleted by "dropday" (path, text), for "restore" to write back
        self.dropped: list[tuple[Path, str]] = []
        self.rt = make_runtime(root, ExtractiveLLM())
        self.clock = datetime(2026, 8, 1, 9, tzinfo=UTC)
        self.steps: list[str] = []
        self.users = list(USERS[:2])

    def close(self) -> None:
        self.rt.close()

    def logs(self) -> list[Path]:
        return sorted(self.root.glob("*/*/users/*/episodes/episode-*.md"))

    def entries(self, path: Path) -> list[str]:
        return re.findall(r"<!-- entry:(\S+) -->", path.read_text())

    def markdown(self) -> dict[Path, bytes]:
        """Every Markdown file of the root, by path, as it stands (the index left out)."""
        return {p: p.read_bytes() for p in sorted(self.root.rglob("*.md"))
                if ".index" not in p.relative_to(self.root).parts}

    def step(self) -> list[Path]:
        """Do one random hand edit; the paths it touched. A step recorded that left every
        log as it was (an edit writing the text the entry had, a narrative already made
        plain by an edit of the same sync, an undo refused, a Reflection run that merged
        nothing) is marked :data:`NO_OP`: it is not counted as made, nor taken for the
        documented kind of step a difference after it is excused by."""
        before, made = self.markdown(), len(self.steps)
        touched = self._step()
        if len(self.steps) > made and self.markdown() == before:
            self.steps[-1] += NO_OP
        return touched

    def _step(self) -> list[Path]:
        # (in this order: a seed walks the same steps as before --reflect, --narrate and
        # --unparent)
        ops = ["add"] * 5 + ["archive", "revive", "delete", "edit", "move", "copy",
                             "rename"] + ["reflect"] * self.reflect + ["undo"] + \
            ["narrate"] * self.narrate + ["unparent"] * self.unparent + \
            [kind for kind in FILE_EDITS for _ in range(self.files)] + \
            ["undo"] * max(0, self.undo - 1)
        op = self.rng.choice(ops)
        if op == "narrate":
            return self.narrative_by_hand()
        if op == "unparent":
            return self.narrative_made_plain()
        if op in FILE_EDITS:
            return getattr(self, op)()
        logs = self.logs()
        if op == "add" or not logs:
            user = UserRef.of(self.rng.choice(self.users))
            self.clock += timedelta(hours=self.rng.choice([1, 5, 30]))
            subject, content = self.rng.choice(TOPICS)
            entry = self.rt.store.append(
                user, Kind.EPISODE, {"timestamp": self.clock.isoformat(),
                                     "parent_type": "memcell", "parent_id": "mc_1"},
                {"Subject": subject, "Content": content}, day=self.clock.date())
            # before an Episode of its user indexed later in time (one whose timestamp was
            # moved, --files): an arrival out of time order
            late = self.rt.db().execute(
                "SELECT 1 FROM entries WHERE kind='episode' AND app_id=? AND project_id=? AND "
                "user_id=? AND deprecated_by IS NULL AND ts > ? LIMIT 1",
                (user.app, user.project, user.user_id, self.clock.timestamp())).fetchone()
            self.steps.append(f"{'late-add' if late else 'add'} {user.user_id} {entry.id} "
                              f"{subject}")
            return [self.rt.store.path_for_id(user, entry.id)]
        path = self.rng.choice(logs)
        ids = self.entries(path)
        text = path.read_text()
        if op == "archive" and ids:
            victim = self.rng.choice(ids)
            others = [i for p in logs if p.parent == path.parent for i in self.entries(p)]
            toward = self.rng.choice([*others, "ep_20200101_0001"])
            if toward == victim or "deprecated_entries" in text.split("\n---\n")[0]:
                return []
            text = text.replace("---\n", f"---\ndeprecated_entries: {{{victim}: {toward}}}\n", 1)
            path.write_text(text)
            self.steps.append(f"archive {path.name} {victim} -> {toward}")
            return [path]
        if op == "revive":
            head, sep, rest = text.partition("\n---\n")
            new = re.sub(r"deprecated_entries:( \{[^}]*\}\n|\n(  .*\n)*)", "", head + "\n")
            if new == head + "\n":
                return []
            path.write_text(new.rstrip("\n") + sep + rest)
            self.steps.append(f"revive {path.name}")
            return [path]
        if op == "delete" and ids:
            victim = self.rng.choice(ids)
            block = rf"<!-- entry:{victim} -->.*?<!-- /entry:{victim} -->\n"
            path.write_text(re.sub(block, "", text, flags=re.S))
            self.steps.append(f"delete {path.name} {victim}")
            return [path]
        if op == "edit" and ids:
            _, content = self.rng.choice(TOPICS)
            new = re.sub(r"(## Content\n)(.*?)(\n)", lambda m: m.group(1) + content + m.group(3),
                         text, count=1, flags=re.S)
            path.write_text(new)
            self.steps.append(f"edit {path.name} first content -> {content[:20]}")
            return [path]
        if op in ("move", "copy"):  # into another user's folder, as a person might
            user = path.parent.parent.name
            to = self.rng.choice([u for u in USERS if u != user])
            dest = path.parent.parent.parent / to / "episodes" / path.name
            if dest.exists():
                return []
            dest.parent.mkdir(parents=True, exist_ok=True)
            if op == "move":
                os.rename(path, dest)
            else:
                shutil.copyfile(path, dest)
            if to not in self.users:
                self.users.append(to)
            self.steps.append(f"{op} {user}/{path.name} -> {to}")
            return [dest, path] if op == "move" else [dest]
        if op == "undo":
            merged = [(r[0], r[1], r[2], r[3]) for r in self.rt.db().execute(
                "SELECT app_id, project_id, user_id, id FROM entries WHERE kind='episode' AND "
                "parent_type='cluster' AND deprecated_by IS NULL ORDER BY 1, 2, 3, 4")]
            if self.merging:  # and a narrative a later merge folded in: the undo cascades
                merged += [(r[0], r[1], r[2], r[3]) for r in self.rt.db().execute(
                    "SELECT a.app_id, a.project_id, a.user_id, a.id FROM entries a JOIN "
                    "entries b ON b.app_id=a.app_id AND b.project_id=a.project_id AND "
                    "b.user_id=a.user_id AND b.id=a.deprecated_by WHERE a.kind='episode' AND "
                    "a.parent_type='cluster' AND b.parent_type='cluster' ORDER BY 1, 2, 3, 4")]
            if not merged:
                return []
            app, project, user, entry_id = self.rng.choice(merged)
            ref = UserRef(app, project, user)
            # drawn only when asked for: a seed walks the same steps as before without them
            paste = self.undo_pasted and self.rng.random() < 0.5
            kill = None
            if self.undo_killed and self.rng.random() < 0.6:  # a take-back only when pasted
                kill = self.rng.choice(TAKE_BACK_KILLS if paste else WRITE_KILLS)
            try:
                with self._undo_hazards(ref, kill, paste) as said:
                    result = undo_merge(self.rt, ref, entry_id, cascade=True)
            except Killed as at:
                self.exercised.update({"undos killed": 1})
                self.steps.append(f"undo {user} {entry_id} killed at {at}{said()}; "
                                  "the next start recovers")
                self._start()
                return self.logs()
            except EverosError as exc:
                if "is taken back" in str(exc):
                    self.exercised.update({"take-backs": 1})
                self.steps.append(f"undo {user} {entry_id} refused{said()}: {exc}")
                return self.logs() if paste else []
            self.exercised.update({"undos": 1, "cascaded": len(result.cascaded)})
            self.steps.append(f"undo {user} {entry_id}"
                              + (f" (cascaded {len(result.cascaded)})" if result.cascaded
                                 else ""))
            return []
        if op == "rename":
            users_dir = path.parent.parent.parent
            user = path.parent.parent.name
            to = self.rng.choice([u for u in USERS if u != user])
            if (users_dir / to).exists():
                return []
            touched = [users_dir / to / p.relative_to(users_dir / user)
                       for p in (users_dir / user).rglob("*.md")]
            old = list((users_dir / user).rglob("*.md"))
            os.rename(users_dir / user, users_dir / to)
            self.users = [to if u == user else u for u in self.users]
            self.steps.append(f"rename {user} -> {to}")
            return touched + old
        if op == "reflect":
            fed, touched = self.feed() if self.merging else ("", [])
            counts = run_reflection(self.rt, f"run_{len(self.steps)}")
            merged = int(counts.get("merged", 0))
            self.exercised.update({"reflect": 1, "reflect merging": int(merged > 0),
                                   "merges": merged})
            self.steps.append(f"reflect{fed} {counts}")
            return touched
        return []

    @contextlib.contextmanager
    def _undo_hazards(self, ref: UserRef, kill: str | None,
                      paste: bool) -> Iterator[Callable[[], str]]:
        """An undo killed at ``kill`` (the n-th Markdown write of the command, or a step of a
        take-back), and with ``paste`` an id of the user's pasted twice into its log as the
        second restore begins (the cascade's earlier undo: checked before, refused there).
        Yields what says what happened."""
        store, writes, what = self.rt.store, [0], []
        real = {name: getattr(store, name) for name in ("deprecate", "undeprecate")}
        real_checkpoint = undo.take_back_checkpoint

        def hazard(name: str) -> Callable[..., Any]:
            def write(*args: Any, **kwargs: Any) -> Any:
                writes[0] += 1
                if name == "undeprecate" and paste and writes[0] > 1 and not what:
                    what.append(self._paste_one(ref, list(args[1])))
                if kill == f"write {writes[0]}":
                    raise Killed(kill)
                return real[name](*args, **kwargs)
            return write

        def checkpoint(step: str) -> None:
            if kill == f"take-back {step}":
                raise Killed(kill)

        for name in real:
            setattr(store, name, hazard(name))
        undo.take_back_checkpoint = checkpoint
        try:
            yield lambda: "".join(f" ({w})" for w in what)
        finally:
            for name, fn in real.items():
                setattr(store, name, fn)
            undo.take_back_checkpoint = real_checkpoint

    def _paste_one(self, ref: UserRef, restoring: list[str]) -> str:
        """The block of one of ``restoring`` (the entries the write is about to restore)
        pasted again at the end of its log: its id twice, in a log the undo writes."""
        for entry_id in self.rng.sample(restoring, len(restoring)):
            path = self.rt.store.path_for_id(ref, entry_id)
            text = path.read_text() if path.is_file() else ""
            block = self._block(text, entry_id, newline=True)
            if block is not None:
                path.write_text(text + "\n" + block.group(0))
                return f"pasted {entry_id} twice into {path.name}"
        return "nothing to paste"

    def _start(self) -> None:
        """The next start: its recovery finishes (or rolls back) the killed undo; a row left
        in the journal afterwards is kept as a finding."""
        self.rt.close()
        self.rt = make_runtime(self.root, ExtractiveLLM())
        journal.recover(self.rt, Indexer(self.rt))
        rows = self.rt.db().execute("SELECT id, step FROM merge_journal").fetchall()
        if rows:
            self.left.append(f"journal rows left after the start: {rows}")

    def feed(self) -> tuple[str, list[Path]]:
        """Two Episodes of one topic for one user, an hour apart, written and synced before a
        Reflection run: they cluster (with each other, or with the topic's cluster, whose
        narrative an update merge then folds them into), so the run merges. Without them
        most runs found no cluster to merge (the walk's Episodes spread over three topics,
        three users and days). Returns the step's words and the logs written."""
        user = UserRef.of(self.rng.choice(self.users))
        subject = self.rng.choice(sorted({s for s, _ in TOPICS}))
        written = []
        for content in [c for s, c in TOPICS if s == subject]:
            self.clock += timedelta(hours=1)
            written.append(self.rt.store.append(
                user, Kind.EPISODE, {"timestamp": self.clock.isoformat(),
                                     "parent_type": "memcell", "parent_id": "mc_1"},
                {"Subject": subject, "Content": content}, day=self.clock.date()))
        touched = list(dict.fromkeys(self.rt.store.path_for_id(user, e.id) for e in written))
        Indexer(self.rt).sync_paths(touched)
        return (f" (fed {user.user_id} {subject}: {', '.join(e.id for e in written)})",
                touched)

    def narrative_by_hand(self) -> list[Path]:
        """A narrative a person writes into a log: ``parent_type: cluster`` and the id of a
        cluster its user has (as ``clusters`` lists it), else one of another user's; with
        ``fresh``, one time in three an id no cluster holds or a ``parent_id`` that is not a
        cluster id."""
        user = UserRef.of(self.rng.choice(self.users))
        held = [(r[0], r[1]) for r in self.rt.db().execute(
            "SELECT cluster_id, user_id FROM clusters ORDER BY cluster_id")]
        if not held:
            return []
        own = [c for c, u in held if u == user.user_id]
        cid = self.rng.choice(own or [c for c, _ in held])
        if self.fresh and self.rng.random() < 1 / 3:
            cid = self.rng.choice([f"cl_{self.rng.getrandbits(48):012x}", "my notes"])
            own = [cid]
        self.clock += timedelta(hours=self.rng.choice([1, 5, 30]))
        subject, content = self.rng.choice(TOPICS)
        entry = self.rt.store.append(
            user, Kind.EPISODE, {"timestamp": self.clock.isoformat(), "parent_type": "cluster",
                                 "parent_id": cid},
            {"Subject": subject, "Content": content}, day=self.clock.date())
        self.steps.append(f"narrate {user.user_id} {entry.id} -> {cid}"
                          f"{'' if own else ' (another user)'} {subject}")
        return [self.rt.store.path_for_id(user, entry.id)]

    def _with_entries(self) -> list[Path]:
        """The logs holding at least one entry: what an edit of one entry picks from."""
        return [p for p in self.logs() if self.entries(p)]

    @staticmethod
    def _block(text: str, entry_id: str, *, newline: bool = False) -> re.Match[str] | None:
        """The entry's whole block in a log's ``text``, its markers included (``newline``:
        and the line end after it, for a block cut out or pasted whole)."""
        end = "\n" if newline else ""
        return re.search(rf"<!-- entry:{entry_id} -->.*?<!-- /entry:{entry_id} -->{end}", text,
                         flags=re.S)

    def narrative_made_plain(self) -> list[Path]:
        """A live narrative's ``parent_type``/``parent_id`` lines taken out by hand: a plain
        Episode now."""
        live = [(r[0], r[1]) for r in self.rt.db().execute(
            "SELECT user_id, id FROM entries WHERE kind='episode' AND parent_type='cluster' "
            "AND deprecated_by IS NULL ORDER BY 1, 2")]
        if not live:
            return []
        user, entry_id = self.rng.choice(live)
        path = self.rt.store.path_for_id(UserRef.of(user), entry_id)
        if not path.exists():  # gone by an edit of this step not synced yet (--together)
            return []
        text = path.read_text()
        block = self._block(text, entry_id)
        if block is None:
            return []
        plain = re.sub(r"parent_type: cluster\n(parent_id: [^\n]*\n)?", "", block.group(0))
        path.write_text(text.replace(block.group(0), plain))
        self.steps.append(f"unparent {user} {entry_id}")
        return [path]

    # ----------------------------------------------------------- --files: FILE_EDITS

    def redate(self) -> list[Path]:
        """A log renamed to another date (its ``date:`` line left as it was): its entries'
        ids name the old day, so none of them belongs in it."""
        logs = self.logs()
        if not logs:
            return []
        path = self.rng.choice(logs)
        day = datetime.strptime(path.stem.removeprefix("episode-"), "%Y-%m-%d")
        to = day + timedelta(days=self.rng.choice([-2, -1, 1, 3]))
        dest = path.with_name(f"episode-{to:%Y-%m-%d}.md")
        if dest.exists():
            return []
        os.rename(path, dest)
        self.steps.append(f"redate {path.parent.parent.name}/{path.name} -> {dest.name}")
        return [dest, path]

    def shift(self) -> list[Path]:
        """An entry cut from its log and pasted at the end of another log of the same user."""
        logs = self._with_entries()
        if not logs:
            return []
        path = self.rng.choice(logs)
        others = [p for p in self.logs() if p.parent == path.parent and p != path]
        if not others:
            return []
        to = self.rng.choice(others)
        victim = self.rng.choice(self.entries(path))
        text = path.read_text()
        block = self._block(text, victim, newline=True)
        if block is None:
            return []
        path.write_text(text.replace(block.group(0), ""))
        to.write_text(to.read_text().rstrip("\n") + "\n\n" + block.group(0))
        self.steps.append(f"shift {victim} {path.name} -> {to.name}")
        return [path, to]

    def dropday(self) -> list[Path]:
        """A whole day's log deleted (kept, for "restore" to bring back)."""
        logs = self.logs()
        if not logs:
            return []
        path = self.rng.choice(logs)
        self.dropped.append((path, path.read_text()))
        path.unlink()
        self.steps.append(f"dropday {path.parent.parent.name}/{path.name}")
        return [path]

    def restore(self) -> list[Path]:
        """A log "dropday" deleted written back as it was (from a backup, the trash): its
        user's folder made again if it went meanwhile."""
        back = [(p, t) for p, t in self.dropped if not p.exists()]
        if not back:
            return []
        path, text = self.rng.choice(back)
        self.dropped.remove((path, text))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        user = path.parent.parent.name
        if user not in self.users:
            self.users.append(user)
        self.steps.append(f"restore {user}/{path.name}")
        return [path]

    def reid(self) -> list[Path]:
        """An entry's id edited by hand (another sequence number of its day): in its markers
        only, or everywhere in its log (an archive mark naming it too)."""
        logs = self._with_entries()
        if not logs:
            return []
        path = self.rng.choice(logs)
        old = self.rng.choice(self.entries(path))
        new = f"{old[:-4]}{int(old[-4:]) + 50 + self.rng.randrange(40):04d}"
        text = path.read_text()
        if new in text:
            return []
        everywhere = self.rng.random() < 0.5
        if everywhere:
            text = text.replace(old, new)
        else:
            text = text.replace(f"<!-- entry:{old} -->", f"<!-- entry:{new} -->").replace(
                f"<!-- /entry:{old} -->", f"<!-- /entry:{new} -->")
        path.write_text(text)
        self.steps.append(f"reid {path.name} {old} -> {new}"
                          f"{' (everywhere in the log)' if everywhere else ''}")
        return [path]

    def dup(self) -> list[Path]:
        """An entry's block pasted again in its log (to start a new one from it), its
        Content edited and its id not: the id twice in one log."""
        logs = self._with_entries()
        if not logs:
            return []
        path = self.rng.choice(logs)
        victim = self.rng.choice(self.entries(path))
        text = path.read_text()
        block = self._block(text, victim, newline=True)
        if block is None:
            return []
        _, content = self.rng.choice(TOPICS)
        copy = re.sub(r"(## Content\n)(.*?)(\n)", lambda m: m.group(1) + content + m.group(3),
                      block.group(0), count=1, flags=re.S)
        at = self.rng.choice([block.start(), len(text)])  # before it, or at the end
        path.write_text(text[:at] + copy + text[at:])
        self.steps.append(f"dup {path.name} {victim} {'before' if at < len(text) else 'end'}")
        return [path]

    def retime(self) -> list[Path]:
        """An entry's timestamp moved by hand (hours, or days, either way)."""
        logs = self._with_entries()
        if not logs:
            return []
        path = self.rng.choice(logs)
        victim = self.rng.choice(self.entries(path))
        text = path.read_text()
        block = self._block(text, victim)
        stamp = block and re.search(r"^timestamp: (\S+)$", block.group(0), flags=re.M)
        if block is None or not stamp:
            return []
        when = datetime.fromisoformat(stamp.group(1)) + timedelta(
            hours=self.rng.choice([-50, -6, -1, 2, 30, 200]))
        moved = block.group(0).replace(stamp.group(0), f"timestamp: {when.isoformat()}", 1)
        path.write_text(text.replace(block.group(0), moved, 1))
        self.steps.append(f"retime {path.name} {victim} -> {when.isoformat()}")
        return [path]

    def _marks(self) -> list[tuple[Path, str, str, str]]:
        """Every archive mark of every log: (path, the line, archived id, its successor)."""
        found = []
        for path in self.logs():
            head = path.read_text().split("\n---\n", 1)[0]
            for m in re.finditer(r"^  (\S+): (\S+)$", head, flags=re.M):
                found.append((path, m.group(0), m.group(1), m.group(2)))
            for m in re.finditer(r"^deprecated_entries: \{(\S+): (\S+)\}$", head, flags=re.M):
                found.append((path, m.group(0), m.group(1), m.group(2)))
        return found

    def unarchive(self) -> list[Path]:
        """One archived Episode un-archived by hand: its line taken out of the log's
        ``deprecated_entries`` (the key too when it was the last)."""
        marks = self._marks()
        if not marks:
            return []
        path, line, old, by = self.rng.choice(marks)
        text = path.read_text()
        if line.startswith("deprecated_entries"):
            text = text.replace(line + "\n", "", 1)
        else:
            text = text.replace(line + "\n", "", 1)
            head, sep, rest = text.partition("\n---\n")
            head = re.sub(r"^deprecated_entries:\n(?!  )", "", head + "\n",
                          flags=re.M).rstrip("\n")
            text = head + sep + rest
        path.write_text(text)
        self.steps.append(f"unarchive {path.name} {old} (was -> {by})")
        return [path]

    def repoint(self) -> list[Path]:
        """An archive mark pointed at another live narrative of the log's user."""
        marks = self._marks()
        if not marks:
            return []
        path, line, old, by = self.rng.choice(marks)
        user = path.parent.parent.name
        others = [r[0] for r in self.rt.db().execute(
            "SELECT id FROM entries WHERE kind='episode' AND parent_type='cluster' AND "
            "deprecated_by IS NULL AND user_id=? AND id NOT IN (?, ?) ORDER BY id",
            (user, by, old))] or [r[0] for r in self.rt.db().execute(  # else any Episode
                "SELECT id FROM entries WHERE kind='episode' AND user_id=? AND id NOT IN "
                "(?, ?) ORDER BY id", (user, by, old))]
        if not others:
            return []
        to = self.rng.choice(others)
        path.write_text(path.read_text().replace(line, line.replace(f": {by}", f": {to}"), 1))
        self.steps.append(f"repoint {path.name} {old}: {by} -> {to}")
        return [path]

    def sync(self, touched: list[Path]) -> str:
        hows = ["scan", "one", "split"] + (["killed"] if self.killed else [])
        how = self.rng.choice(hows) if touched else "scan"
        if how == "killed":  # the index written, the process killed before it told the
            # subscribers (its publish notes left); the next start's scan hands them over
            real = Indexer._publish
            Indexer._publish = lambda indexer, jobs, notes: None  # type: ignore[method-assign]
            try:
                Indexer(self.rt).sync_paths(touched)
            finally:
                Indexer._publish = real  # type: ignore[method-assign]
            Indexer(self.rt).scan()
        elif how == "scan":
            Indexer(self.rt).scan()
        elif how == "one":
            Indexer(self.rt).sync_paths(touched)
        else:
            cut = self.rng.randrange(len(touched) + 1)
            Indexer(self.rt).sync_paths(touched[:cut])
            Indexer(self.rt).sync_paths(touched[cut:])
        return how


#: steps after which Episodes may stay where they joined until ``recluster`` (a member
#: deleted, archived or edited away; Episodes moved in out of time order; a source revived
#: is placed among members later than it; a narrative made plain leaves its cluster as if
#: deleted). Not ``reflect`` nor ``undo``: a run places the Episodes of each user it merged
#: for as a rebuild does (``place_after_merges``), an undo those of its user
#: (``place_after_undo``)
KNOWN = ("edit", "delete", "archive", "move", "copy", "rename", "revive", "unparent",
         # --files: a log renamed to another day, an entry cut into another log, a log
         # deleted and an id edited delete Episodes; a log restored and an id edited add
         # them out of time order; a mark taken out revives, one re-pointed archives; an id
         # twice leaves the second copy out; a timestamp moved is an edit
         "redate", "shift", "dropday", "restore", "reid", "unarchive", "repoint", "dup",
         "retime",
         # an Episode added before one of its user moved later in time (retime): out of order
         "late-add")

class Killed(BaseException):
    """The process killed mid-undo (--undo-killed): nothing in it catches this."""


#: where --undo-killed kills an undo: its n-th Markdown write (a cascade writes more)...
WRITE_KILLS = ("write 1", "write 2", "write 3", "write 4")
#: ...or, the cascade refused by an id pasted (--undo-pasted), a step of its take-back
TAKE_BACK_KILLS = ("take-back journaled", "take-back live_again", "take-back archived_again",
                   "take-back audit", "take-back indexed")

#: the mark of a step that changed no log (:meth:`Walk.step`)
NO_OP = " (no-op: no log changed)"

#: the edits of files and ids ``--files`` weighs (each of them that many times)
FILE_EDITS = ("redate", "shift", "dropday", "restore", "reid", "unarchive", "repoint", "dup",
              "retime")


#: the steps a person makes by hand in a text editor or a file manager (not ``add``, which
#: the product writes, nor Reflection or undo)
HAND = ("archive", "revive", "delete", "edit", "move", "copy", "rename", "narrate", "unparent",
        *FILE_EDITS)


def exercised_line(exercised: Counter[str], kinds: Counter[str]) -> str:
    """What the walks exercised: Reflection steps (those that merged, and the merges), undos
    done (and the later merges they cascaded to), hand edits that changed a log."""
    hand = sum(n for k, n in kinds.items() if k in HAND)
    return (f"exercised: {exercised['reflect']} Reflection steps, {exercised['reflect merging']} "
            f"of them merging ({exercised['merges']} merges); {exercised['undos']} undos "
            f"({exercised['cascaded']} later merges cascaded to); "
            + (f"{exercised['undos killed']} undos killed and recovered at the next start; "
               f"{exercised['take-backs']} cascades refused and taken back; "
               if {"undos killed", "take-backs"} & set(exercised) else "")
            + f"{hand} hand edits")


def close_round(steps: list[str], made: int, how: str, kinds: Counter[str]) -> list[str]:
    """End one round of edits (``steps[made:]``, recorded since the last sync) once it is
    synced ``how``: the round becomes one line tagged with the sync (a line "no edit" when
    it recorded no step, where the tag went onto the step before, a change it did not make),
    ``kinds`` counts its steps, those that changed no log (:data:`NO_OP`) apart, and the
    kinds of those that changed one are returned: only they may excuse a difference as a
    documented one."""
    ops = [s.split()[0] for s in steps[made:] if not s.endswith(NO_OP)]
    kinds.update(ops)
    kinds.update(f"{s.split()[0]} (no-op)" for s in steps[made:] if s.endswith(NO_OP))
    if len(steps) == made:
        steps.append("no edit")
    if len(steps) - made > 1:
        steps[made:] = [" + ".join(steps[made:])]
    steps[-1] = f"{steps[-1]} [{how}]"
    return ops


def narratives(rt: Any) -> set[tuple[str, str, str, str]]:
    """The live narratives, as member keys (app, project, user, id)."""
    return {(r[0], r[1], r[2], r[3]) for r in rt.db().execute(
        "SELECT app_id, project_id, user_id, id FROM entries WHERE kind='episode' AND "
        "parent_type='cluster' AND deprecated_by IS NULL")}


def narrative_rows(tables: dict, keys: set) -> set:
    """Where each live narrative is, what each cluster's narrative is, and the history rows
    archived toward a live narrative (the rest follow where live Episodes sit)."""
    members = {(*m[:5], m[7]) for m in tables["members"]
               if m[:4] in keys or (m[7] is not None and (*m[:3], m[7]) in keys)}
    held = {(c[0], c[3], c[7]) for c in tables["clusters"] if c[7] is not None}
    return members | held


def differs(live: dict, rebuilt: dict, strict: bool) -> list[str]:
    out = []
    for table in ("clusters", "members"):
        a, b = set(live[table]), set(rebuilt[table])
        if a != b:
            out += [f"{table} live only: {r[:9]}" for r in sorted(a - b, key=str)]
            out += [f"{table} rebuilt only: {r[:9]}" for r in sorted(b - a, key=str)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--walks", type=int, default=50)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--reflect", type=int, default=2,
                    help="weight of a Reflection run among the steps (2 of 17 by default)")
    ap.add_argument("--narrate", type=int, default=0,
                    help="weight of a narrative written by hand among the steps (0 by "
                         "default: the walks of a seed as before)")
    ap.add_argument("--unparent", type=int, default=0,
                    help="weight of a narrative made a plain Episode by hand among the steps "
                         "(0 by default: the walks of a seed as before)")
    ap.add_argument("--files", type=int, default=0,
                    help="weight of each edit of a file or an id among the steps (a log "
                         "renamed to another date, an entry cut into another log, a log "
                         "deleted, a deleted log restored, an id edited, an archive mark "
                         "taken out, one pointed at another narrative; 0 by default: the "
                         "walks of a seed as before)")
    ap.add_argument("--together", type=int, default=1,
                    help="up to this many edits (at random) in a step before the Markdown is "
                         "synced, as a person saves several logs, or one log several times, "
                         "before the watcher's next flush (1 by default: the walks of a seed "
                         "as before)")
    ap.add_argument("--undo", type=int, default=1,
                    help="weight of an undo of a live narrative's merge (cascading) among the "
                         "steps (1 by default: the walks of a seed as before)")
    ap.add_argument("--killed", action="store_true",
                    help="a sync of the touched logs may be killed once it wrote the index, "
                         "before clustering was told (its publish notes left); the next scan "
                         "hands the changes over (off: the walks of a seed as before)")
    ap.add_argument("--merging", action=argparse.BooleanOptionalAction, default=True,
                    help="a Reflection step first writes two Episodes that cluster, so most "
                         "runs merge (--no-merging: the walks of a seed as before session 51, "
                         "whose runs mostly merged nothing)")
    ap.add_argument("--undo-killed", action="store_true",
                    help="an undo may be killed at one of its Markdown writes, or its "
                         "cascade's take-back at one of its steps; the next start recovers "
                         "it, and a journal row left after that is a finding (off: the walks "
                         "of a seed as before)")
    ap.add_argument("--undo-pasted", action="store_true",
                    help="a cascading undo may meet an id pasted twice by hand into a log "
                         "of its user as it begins the earlier undo (refused there: the later "
                         "undos are taken back; off: the walks of a seed as before)")
    ap.add_argument("--fresh", action="store_true",
                    help="a narrative by hand may name a cluster id no cluster holds, or a "
                         "parent_id that is not a cluster id")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    settling.JUST_WRITTEN_NS = 0
    settling.pause = lambda seconds: None
    started = time.monotonic()
    done = known = 0
    kinds: Counter[str] = Counter()  # the steps made (not those that found nothing to do)
    exercised: Counter[str] = Counter()  # merges, undos (Walk.exercised), over the walks
    for walk_no in range(args.walks):
        if time.monotonic() - started > args.minutes * 60:
            break
        seed = args.seed + walk_no
        rng = random.Random(seed)
        with tempfile.TemporaryDirectory() as tmp:
            walk = Walk(Path(tmp) / "root", rng, args.reflect, args.narrate, args.fresh,
                        args.unparent, args.files, args.undo, args.killed, args.merging,
                        args.undo_killed, args.undo_pasted)
            try:
                Indexer(walk.rt).scan()
                made = 0
                for n in range(args.steps):
                    # --together: edits made before the watcher syncs any of them
                    edits = 1 if args.together <= 1 else rng.randint(1, args.together)
                    touched = []
                    for _ in range(edits):
                        touched += [p for p in walk.step() if p not in touched]
                    how = walk.sync(touched)
                    ops = close_round(walk.steps, made, how, kinds)
                    made = len(walk.steps)
                    live = cluster_tables(walk.rt)
                    rebuilt = as_reindexed(walk.rt, Path(tmp) / f"rebuilt{n}")
                    shutil.rmtree(Path(tmp) / f"rebuilt{n}")
                    diff = differs(live, rebuilt, args.strict) + walk.left
                    # a step of several edits is known if one of them is (one that changed
                    # a log: a step that changed none is no step a difference follows from)
                    op = next((o for o in ops if o in KNOWN), ops[-1] if ops else "")
                    keys = narratives(walk.rt)
                    if diff and not args.strict and op in KNOWN and \
                            narrative_rows(live, keys) == narrative_rows(rebuilt, keys):
                        known += 1  # documented: a user runs `recluster`
                        ClusterService(walk.rt).recluster()
                        continue
                    if diff:
                        print(f"seed {seed}: differs after step {n + 1}")
                        for s in walk.steps:
                            print("  ", s)
                        for d in diff:
                            print("   ", d)
                        return 1
            finally:
                exercised.update(walk.exercised)
                walk.close()
        done += 1
    print(f"{done} walks of {args.steps} steps: live equals reindex after every step "
          f"({known} documented differences, reclustered; {time.monotonic() - started:.0f} s)")
    print("steps made: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    print(exercised_line(exercised, kinds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
