"""Random walks of hand edits against a ``reindex`` of a copy: after every step the live
cluster tables must equal those a rebuild of the same Markdown makes.

A step is one of: add an Episode, archive one by hand (``deprecated_entries``), revive one
(its key removed), delete one, edit one's text, move a log to another user's folder, copy
one there, rename a user folder, run Reflection, undo a merge, write a narrative by hand
(``--narrate``: naming a cluster its user has, else one of another user), make a narrative a
plain Episode (``--unparent``: its ``parent_type``/``parent_id`` lines taken out). The Markdown is
then synced as the watcher or a scan would (the touched paths in one flush, or split over
two, or a scan). The first walk that differs prints its seed, its steps and the differing
rows, and the script exits 1.

    .venv/bin/python bench/hand_edit_walk.py --walks 200 --steps 12 [--seed 0] [--minutes 30]
        [--reflect 2]   (the weight of a Reflection run among the 17 kinds of step: 8 for more)
        [--narrate 0]   (the weight of a narrative written by hand: 0, the walks as before)
        [--unparent 0]  (the weight of a narrative made a plain Episode: 0, the walks as before)
        [--fresh]       (a narrative by hand may also name a cluster id no cluster holds, or
                         a parent_id that is not a cluster id; off: the walks of a seed as before)

Known and documented differences are not checked (clustering/service.py): an Episode out of
time order, or a member deleted or edited away, leaves later Episodes where they joined until
``recluster``; after such a step (edit, delete, archive, move, rename) a difference that leaves
every narrative, consolidated cluster and history row as rebuilt is counted, the live clusters
are rebuilt (``recluster``, as a user would) and the walk goes on (``--strict`` reports it).
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import re
import shutil
import sys
import tempfile
import time
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
                 narrate: int = 0, fresh: bool = False, unparent: int = 0) -> None:
        self.root, self.rng = root, rng
        self.reflect = reflect  # "reflect" entries among the 17 ops (2: one step in 8.5)
        self.narrate = narrate  # "narrate" entries, after the others
        self.fresh = fresh  # a narrative may name an id no cluster holds, or no cluster id
        self.unparent = unparent  # "unparent" entries, after the "narrate" ones
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

    def step(self) -> list[Path]:
        """Do one random hand edit; the paths it touched."""
        # (in this order: a seed walks the same steps as before --reflect, --narrate and
        # --unparent)
        ops = ["add"] * 5 + ["archive", "revive", "delete", "edit", "move", "copy",
                             "rename"] + ["reflect"] * self.reflect + ["undo"] + \
            ["narrate"] * self.narrate + ["unparent"] * self.unparent
        op = self.rng.choice(ops)
        if op == "narrate":
            return self.narrative_by_hand()
        if op == "unparent":
            return self.narrative_made_plain()
        logs = self.logs()
        if op == "add" or not logs:
            user = UserRef.of(self.rng.choice(self.users))
            self.clock += timedelta(hours=self.rng.choice([1, 5, 30]))
            subject, content = self.rng.choice(TOPICS)
            entry = self.rt.store.append(
                user, Kind.EPISODE, {"timestamp": self.clock.isoformat(),
                                     "parent_type": "memcell", "parent_id": "mc_1"},
                {"Subject": subject, "Content": content}, day=self.clock.date())
            self.steps.append(f"add {user.user_id} {entry.id} {subject}")
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
            if not merged:
                return []
            app, project, user, entry_id = self.rng.choice(merged)
            try:
                undo_merge(self.rt, UserRef(app, project, user), entry_id, cascade=True)
            except EverosError as exc:
                self.steps.append(f"undo {user} {entry_id} refused: {exc}")
                return []
            self.steps.append(f"undo {user} {entry_id}")
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
            self.steps.append(f"reflect {run_reflection(self.rt, f'run_{len(self.steps)}')}")
            return []
        return []

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
        text = path.read_text()
        block = re.search(rf"<!-- entry:{entry_id} -->.*?<!-- /entry:{entry_id} -->", text,
                          flags=re.S)
        if block is None:
            return []
        plain = re.sub(r"parent_type: cluster\n(parent_id: [^\n]*\n)?", "", block.group(0))
        path.write_text(text.replace(block.group(0), plain))
        self.steps.append(f"unparent {user} {entry_id}")
        return [path]

    def sync(self, touched: list[Path]) -> str:
        how = self.rng.choice(["scan", "one", "split"]) if touched else "scan"
        if how == "scan":
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
KNOWN = ("edit", "delete", "archive", "move", "copy", "rename", "revive", "unparent")


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
    ap.add_argument("--fresh", action="store_true",
                    help="a narrative by hand may name a cluster id no cluster holds, or a "
                         "parent_id that is not a cluster id")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    settling.JUST_WRITTEN_NS = 0
    settling.pause = lambda seconds: None
    started = time.monotonic()
    done = known = 0
    for walk_no in range(args.walks):
        if time.monotonic() - started > args.minutes * 60:
            break
        seed = args.seed + walk_no
        rng = random.Random(seed)
        with tempfile.TemporaryDirectory() as tmp:
            walk = Walk(Path(tmp) / "root", rng, args.reflect, args.narrate, args.fresh,
                        args.unparent)
            try:
                Indexer(walk.rt).scan()
                for n in range(args.steps):
                    touched = walk.step()
                    how = walk.sync(touched)
                    walk.steps[-1:] = [f"{walk.steps[-1]} [{how}]"] if walk.steps else []
                    live = cluster_tables(walk.rt)
                    rebuilt = as_reindexed(walk.rt, Path(tmp) / f"rebuilt{n}")
                    shutil.rmtree(Path(tmp) / f"rebuilt{n}")
                    diff = differs(live, rebuilt, args.strict)
                    op = walk.steps[-1].split()[0] if walk.steps else ""
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
                walk.close()
        done += 1
    print(f"{done} walks of {args.steps} steps: live equals reindex after every step "
          f"({known} documented differences, reclustered; {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
