"""What a Reflection run pays to settle the copies of its merges (issue 15): a merge looks, before
its journal row goes, for another user's folder holding a copy of it half done (a folder copied
by hand while the merge ran: ``journal.settle_copies_of``). It lists the users once per batch
and reads each other user's logs that can hold a part of a merge of the batch (its episode
and fact logs of the merge day, its sources' logs), if there are any, once for every merge of
the batch; session 49's look-up read the episode log of the merge day alone (a copy holding
the facts or an archived source without the narrative went unseen).

Builds a root of ``--users`` users who each hold one Episode logged on the merge day (the
worst case: every listed user has a log to read; none holds a copy) and ``--merging`` users
with three Episodes of one topic each (one merge each, committed in one batch), indexes it,
then runs Reflection once in-process with the offline provider and prints the wall time of the
run and of the copy look-ups within that same run (and how many logs they read). Then, on the
same root, it times the look-ups of the run's batches again: the look-up as session 49 left it
(kept below, verbatim but for its names: :func:`previous_look_up`), as session 50 left it
(:func:`session50_look_up`, the same logs looked at as now) and as it is now, each both
ways: reading every other user's log of the day, and (as a batch does) skipping the logs last
modified before the batch began (``written_since_ns``); no log of the root holds a copy, so
none finds one ("logs read" counts the reads, not the checks of a log's time). Each is
repeated ``--repeat`` times, the best kept (the machine is shared).

    nice -n 10 python bench/copy_settle_cost.py --users 2000 --merging 20
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import UTC, date, datetime
from pathlib import Path
from stat import S_ISREG

from everos_reflect.embedding import HashEmbedder
from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.markdown import writer
from everos_reflect.model import EntryId, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import ClusteringSettings, Settings
from everos_reflect.strategies import journal
from everos_reflect.strategies.reflect import NAME, ReflectEpisodes

TOPIC = [
    ("{u} has no pets", "{u} has no pets: the apartment does not allow a dog."),
    ("{u} adopted a dog named Toby", "{u} has a pet now: {u} adopted a dog named Toby."),
    ("{u} adopted a second dog", "{u} adopted another dog named Buddy; two dogs, Toby and Buddy."),
]


def write_log(rt: Runtime, ref: UserRef, day: date, episodes: list[tuple[str, str]]) -> None:
    """One episode log written directly (no fsync per entry: the root is built, not timed)."""
    text = writer.new_log_text(Kind.EPISODE, ref.user_id, day)
    for n, (subject, content) in enumerate(episodes, start=1):
        meta = {"owner_id": ref.user_id, "timestamp": f"{day.isoformat()}T0{n}:00:00+00:00",
                "parent_type": "memcell", "parent_id": "mc_1"}
        block = writer.render_entry(str(EntryId(Kind.EPISODE, day, n)), meta,
                                    {"Subject": subject, "Content": content})
        text = writer.append_entry(text, block)
    path = rt.store.log_path(ref, Kind.EPISODE, day)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")


def previous_look_up(runtime: Runtime, indexer: Indexer, plans: list[journal.Plan], *,
                     withdraw: bool = False, written_since_ns: int | None = None) -> None:
    """``journal.settle_copies_of`` as session 49 left it (its docstring and comments cut), to
    time it against the current one on the same root in the same run."""
    by_day: dict[date, list[journal.Plan]] = {}
    for plan in plans:
        by_day.setdefault(plan.day_date, []).append(plan)
    real_root = os.path.realpath(runtime.store.root)
    for ref in runtime.store.iter_users():
        for day, group in by_day.items():
            ids = [p.id for p in group if p.ref != ref]
            if not ids:
                continue
            path = runtime.store.log_path(ref, Kind.EPISODE, day)
            try:
                st = path.stat()
                if not S_ISREG(st.st_mode) or (written_since_ns is not None
                                              and st.st_mtime_ns < written_since_ns):
                    continue
                named = journal._named_in(path, ids, real_root)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError:
                continue
            for plan in group:
                if plan.id in named:
                    journal._settle_copy(runtime, indexer, plan, ref, withdraw=withdraw)


def session50_look_up(runtime: Runtime, indexer: Indexer, plans: list[journal.Plan], *,
                      withdraw: bool = False, written_since_ns: int | None = None) -> None:
    """``journal.settle_copies_of`` as session 50 left it (its docstring cut), to time it
    against the current one on the same root in the same run: session 51 looks at each
    user's logs' times in one loop (:func:`journal._written_since`) before any bookkeeping."""
    if written_since_ns is None:
        written_since_ns = journal.journalled_since(plans)
    own: dict[UserRef, set[str]] = {}
    for plan in plans:
        own.setdefault(plan.ref, set()).add(plan.id)
    store = runtime.store
    real_root, root = os.path.realpath(store.root), os.fspath(store.root)
    looks = journal._copy_looks(plans)
    needles: dict[str, set[str]] = {}
    for plan in plans:
        for rel in looks[plan.id].logs:
            needles.setdefault(rel, set()).update(
                [plan.id, *([plan.merged_id] if plan.merged_id else [])])
    for ref in store.iter_users():
        mine = own.get(ref, set())
        theirs = [plan for plan in plans if plan.id not in mine]
        if not theirs:
            continue
        folder = os.path.join(root, ref.app, ref.project, "users", ref.user_id)
        named: dict[str, set[str] | None] = {}

        def names(rel: str, any_time: bool = False, folder: str = folder,
                  named: dict[str, set[str] | None] = named) -> set[str]:
            if rel not in named or (any_time and named[rel] is None):
                named[rel] = journal._named_since(
                    store, os.path.join(folder, rel), needles[rel], real_root,
                    None if any_time else written_since_ns)
            return named[rel] or set()

        if not any(names(rel) for rel in needles):
            continue
        for plan in theirs:
            if journal._holds_part(plan, looks[plan.id], names):
                journal._settle_copy(runtime, indexer, plan, ref, withdraw=withdraw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=2000,
                        help="users with one Episode on the merge day")
    parser.add_argument("--merging", type=int, default=20, help="users with one merge each")
    parser.add_argument("--repeat", type=int, default=3,
                        help="times each look-up is timed again after the run (best kept)")
    args = parser.parse_args(argv)
    today = datetime.now(UTC).date()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(clustering=ClusteringSettings(
            threshold=0.25, time_window_days=60.0, rejoin_threshold=0.25, member_threshold=0.0))
        rt = Runtime(Path(tmp), settings, embedder=HashEmbedder(64), llm=ExtractiveLLM())
        for n in range(args.users):
            write_log(rt, UserRef.of(f"u_other{n:05d}"), today,
                      [("A note", f"User {n} wrote a note about the weather.")])
        for n in range(args.merging):
            user = f"u_merge{n:03d}"
            write_log(rt, UserRef.of(user), date(2026, 9, 4),
                      [(s.format(u=user), c.format(u=user)) for s, c in TOPIC])
        Indexer(rt).scan()

        spent: list[float] = []
        real = journal.settle_copies_of

        batches: list[list[object]] = []

        def timed(*a: object, **k: object) -> object:
            batches.append(list(a[2]))  # type: ignore[call-overload]
            t0 = time.perf_counter()
            try:  # what it finds is the batch's to report (the copies it could not settle)
                return real(*a, **k)  # type: ignore[arg-type]
            finally:
                spent.append(time.perf_counter() - t0)

        reads: list[int] = []
        real_read = journal._named_in

        def counted(*a: object, **k: object) -> set[str]:
            reads.append(1)
            return real_read(*a, **k)  # type: ignore[arg-type]

        journal.settle_copies_of = timed  # type: ignore[assignment]
        journal._named_in = counted  # type: ignore[assignment]
        values = validate_strategy_settings(NAME, {}, "ome.toml")
        t0 = time.perf_counter()
        counts = ReflectEpisodes().run(RunContext(rt, values, "bench", "manual", force=True))
        run = time.perf_counter() - t0
        journal.settle_copies_of = real
        in_run = len(reads)
        both = {}
        since = time.time_ns() - journal.MTIME_SLACK_NS
        ways = [(f"{who}, {label}", fn, when)
                for who, fn in (("session 49's", previous_look_up),
                                ("session 50's", session50_look_up), ("now", real))
                for label, when in (("every log read", 0), ("older logs skipped", since))]
        for _ in range(max(1, args.repeat)):
            for label, fn, when in ways:  # interleaved: a load spike hits every way alike
                indexer = Indexer(rt)
                reads_before, t0 = len(reads), time.perf_counter()
                for plans in batches:
                    fn(rt, indexer, plans, written_since_ns=when)  # type: ignore[operator]
                seconds, read = time.perf_counter() - t0, len(reads) - reads_before
                best = both.get(label)
                both[label] = (seconds if best is None else min(best[0], seconds), read)
        journal._named_in = real_read
        rt.close()
    print(f"{args.users} users with a log of the merge day, {args.merging} merging users: "
          f"merged {counts.get('merged', 0)}")
    print(f"Reflection run: {run * 1000:.0f} ms wall; the copy look-ups in it: "
          f"{sum(spent) * 1000:.1f} ms in {len(spent)} call(s) "
          f"({100 * sum(spent) / run:.1f}% of the run), {in_run} logs read")
    for label, (seconds, read) in both.items():
        print(f"the same {len(batches)} look-up(s) again, {label}: {seconds * 1000:.1f} ms "
              f"(best of {max(1, args.repeat)}), {read} logs read")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
