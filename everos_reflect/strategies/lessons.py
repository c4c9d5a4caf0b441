"""``learn_lessons`` (seed 002, SPEC §10): task records → procedural lessons per task type.

Trigger: a task record written (on write, behind ``cooldown_seconds``); the window is every live
task not yet consumed (the changes cursor), so tasks written during a cooldown are learned from
together, in one batch. Per owner and task type:

1. **Candidates.** With an LLM: one ``lessons`` call over the window's tasks of that type
   (SPEC §9 ``{"lessons": [...], "avoid": [...]}``); each candidate cites the tasks shown.
   Offline (the ``extractive`` provider): the deterministic lessons of
   :func:`~everos_reflect.procedural.learning.offline_candidates` over all live tasks of the
   type — recurring errors and the steps that separate successes from failures — nothing else.
2. **Match** each candidate with the live lessons of the type
   (:func:`~everos_reflect.procedural.learning.classify`; offline lessons by their
   ``signature``): a restatement adds the new tasks to the lesson's ``evidence`` and bumps
   ``confirmations``; a refinement writes the new lesson and archives the old one through
   ``deprecated_entries``; a contradiction writes the new lesson and marks both ``contested``;
   the rest are new lessons. A lesson written or confirmed keeps ``evidence_hash`` of its
   tasks (:class:`_Hashes`); a task edited since makes it stale (provenance, checked at the
   start of each run too), so it is no longer matched and the task is learned from anew.
3. **Decide** contested pairs once more tasks have spoken: a side ahead by
   ``contest_margin`` confirmations becomes ``active`` again, the other ``retired``.

A task is shown to the model as one line of at most :data:`MAX_TASK_PROMPT_CHARS` characters,
less when many long tasks share one prompt (a longer one is cut and says so: "… (clipped from N
characters)"; the run counts it as ``clipped``), as every task call clips its records. A call
the server refuses for good (HTTP 400, 413, 422: the request itself, not an outage) fails the
owner's window as any failed call does, but sets that task type's tasks aside: they are
kept in the cursor with the failure recorded in ``derivation_report`` (``set aside: <ids>``), so
the rest of the window is learned from in the next run instead of failing behind them for ever;
editing a task, or changing the prompts or the ``[llm]`` model, sends it again.

Writes are one atomic append per owner and type, tagged with the window's key, and the run loop
of :class:`~everos_reflect.strategies.belief_store.BeliefTier` moves the cursor and records the
``derivation_report`` row only after them, so a crash re-reads the window and writes nothing
twice. Only lessons this strategy wrote (``created_by: learn_lessons``) have their metadata
changed; a person's lesson is confirmed in the report but never rewritten.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from everos_reflect.engine.registry import RunContext, SettingSpec, count_between
from everos_reflect.engine.triggers import OnWriteTrigger
from everos_reflect.errors import EverosError, ProviderUnavailable, describe
from everos_reflect.index import cursors
from everos_reflect.llm.tasks import MAX_RECORD_PROMPT_CHARS
from everos_reflect.model import Entry, Kind, UserRef, quoted_value
from everos_reflect.problem_words import counted
from everos_reflect.procedural import learning
from everos_reflect.procedural.lessons import CREATED_BY, Lesson, live_rivals, read_lesson
from everos_reflect.procedural.tasks import TaskRecord, read_task
from everos_reflect.strategies import beliefs, provenance
from everos_reflect.strategies.belief_store import (
    DERIVATION_KEY,
    BeliefTier,
    Budget,
    Derived,
    Refusals,
    SetAside,
    Work,
    derived_meta,
    llm_provider,
    sync,
    tier_settings,
)
from everos_reflect.strategies.provenance import cited_hash, evidence_hashes

if TYPE_CHECKING:

    import numpy as np

    from everos_reflect.runtime import Runtime

NAME = "learn_lessons"
CONTESTED, ACTIVE, RETIRED = "contested", "active", "retired"
#: The most characters of one task a prompt shows: a record made through ``task add``, the
#: API or MCP may hold a 4,000-character goal and 150 lines of 2,000, a hand-written one
#: anything the log's size allows (a 10 MB goal made a 10 MB prompt). Every task call clips
#: its records the same way (:func:`~everos_reflect.llm.tasks.clip_records`).
MAX_TASK_PROMPT_CHARS = MAX_RECORD_PROMPT_CHARS
def latest(evidence: Sequence[str], stamps: Mapping[str, datetime | None]) -> tuple[str, ...]:
    """``evidence`` without repeats and, past ``beliefs.MAX_CITATIONS`` tasks, cut to the
    most recent ones (``stamps``: task id → its timestamp; ties by id, a task without one
    cut first), the order given kept: every tier's rule (:func:`beliefs.most_recent`);
    ``confirmations`` counts them all. A lesson citing every task it was learned or
    confirmed from outgrew the 64 KiB a metadata block may hold at some 900 tasks (an
    offline lesson of an error 900 deploys met, or one a model restated run after run): it
    could not be written, and its task type failed every run, its tasks never consumed."""
    return tuple(beliefs.most_recent(evidence, stamps))


def _fraction(value: float) -> str | None:
    return None if 0 < value <= 1 else f"must be in (0, 1], got {quoted_value(value)}"


@dataclass
class LessonState:
    """One owner's task records and lessons, as Markdown has them."""

    tasks: list[Entry]
    lessons: list[Entry]

    @classmethod
    def load(cls, runtime: Runtime, ref: UserRef) -> LessonState:
        return cls(runtime.store.entries(ref, Kind.TASK), runtime.store.entries(ref, Kind.LESSON))

    def written_by(self, key: str, kind: Kind) -> list[Entry]:
        """Lessons already written for the window ``key`` (after a crash)."""
        return [e for e in self.lessons if e.meta.get(DERIVATION_KEY) == key]

    def live_tasks(self) -> list[TaskRecord]:
        return [t for t in map(read_task, self.tasks) if t.deprecated_by is None and t.task_type]

    def live_lessons(self, task_type: str) -> list[Lesson]:
        return [x for x in map(read_lesson, self.lessons) if x.live and x.task_type == task_type]

    def task_stamps(self) -> dict[str, datetime | None]:
        """Task id → its timestamp (what :func:`latest` keeps the most recent by)."""
        return {e.id: e.timestamp for e in self.tasks}


@dataclass
class _Plan:
    """What one task type's candidates do to its lessons."""

    confirm: dict[str, tuple[tuple[str, ...], int]]  # lesson id → (new evidence, new count)
    new: list[tuple[learning.Candidate, str, Lesson | None]]  # candidate, status, old lesson
    handwritten: int = 0
    garbled: dict[str, tuple[str, ...]] = field(default_factory=dict)  # lesson id → keys


class LearnLessons(BeliefTier):
    name = NAME
    description = "Learn procedural lessons per task type from task records (seed 002)."
    reads = "task records"
    output_kind = Kind.LESSON
    task = "lessons"
    data_trigger = OnWriteTrigger()  # the cooldown is applied by observe()
    settings = (
        SettingSpec("restate_similarity", float, learning.RESTATE_SIMILARITY,
                    "Cosine similarity at which a candidate restates a lesson.", _fraction),
        SettingSpec("related_similarity", float, learning.RELATED_SIMILARITY,
                    "Cosine similarity at which a candidate is about the same lesson "
                    "(refines or contradicts it).", _fraction),
        SettingSpec("min_recurrence", int, learning.MIN_RECURRENCE,
                    "Offline: tasks an error must recur in to become an avoid lesson.",
                    count_between(1, 1_000, "tasks")),
        SettingSpec("contest_margin", int, 2,
                    "Confirmations one side of a contested pair must lead by to win.",
                    count_between(1, 1_000, "confirmations")),
        *tier_settings(cooldown=60.0),
    )

    # -- the window ---------------------------------------------------------------------------

    def candidates(self, state: Any, settings: Mapping[str, Any]) -> dict[str, str]:
        return {e.id: e.content_hash for e in state.tasks
                if e.deprecated_by is None and read_task(e).task_type}

    def due(self, state: Any, window: list[str], settings: Mapping[str, Any]) -> bool:
        return bool(window)

    def needs_llm(self, runtime: Runtime) -> str | None:
        return None  # the offline path is honest (see the module docstring)

    def load_state(self, runtime: Runtime, ref: UserRef) -> LessonState:
        return LessonState.load(runtime, ref)

    def owner_work(self, runtime: Runtime, ref: UserRef, settings: Mapping[str, Any], *,
                   force: bool = False, fix: bool = False) -> Work | None:
        from everos_reflect.strategies import beliefs

        state = LessonState.load(runtime, ref)
        if not state.tasks:
            return None
        if fix:
            # a lesson whose task was edited since is stale before candidates meet the live
            # lessons (the indexer's check may not have run yet): restated, the edited task
            # confirmed it, was consumed, and the lesson it no longer supports stayed current
            touched = set(provenance.check(runtime, ref).written)
            touched |= repair_lessons(runtime, ref, state)
            if touched:
                sync(runtime, touched)
                state = LessonState.load(runtime, ref)
        done = cursors.consumed(runtime.db(), self.name, ref)  # once per poll, as the tiers
        state, items = self.pending(runtime, ref, settings, state,  # type: ignore[arg-type]
                                    done=done)
        deferred = 0
        if llm_provider(runtime) != "extractive":  # offline, no call is made
            items, deferred = _within_calls(state, items, int(settings["max_llm_calls"]))
        if items and (force or self.due(state, list(items), settings)):
            # every task left out of the window (past max_records, or of a task type past
            # max_llm_calls) is unconsumed and waits for the next run; the run says how many,
            # as the other tiers do
            left = self.backlog(runtime, ref, settings, state,  # type: ignore[arg-type]
                                done=done)
            return Work(ref, state, items,  # type: ignore[arg-type]
                        beliefs.window_key(self.name, str(ref), items), deferred,
                        deferred_records=left - len(items))
        return None

    def written_for(self, state: Any, items: Mapping[str, str],
                    written: Sequence[Entry]) -> dict[str, str]:
        """Each task type's lessons are appended in turn: a process killed between two types
        wrote the first ones only. The tasks of a type with no lesson under the window's key
        were not learned from and wait for the next run (a type that only confirmed lessons
        is asked again, which confirms nothing twice: its tasks are in their evidence)."""
        learned = {read_lesson(e).task_type for e in written}
        types = {e.id: read_task(e).task_type for e in state.tasks}
        return {i: h for i, h in items.items() if types.get(i, "") in learned or i not in types}

    def calls_for(self, work: Work, settings: Mapping[str, Any]) -> int:
        """One call per task type of the window."""
        return max(1, len(_types_of(work.state, work.items)))  # type: ignore[arg-type]

    # -- one window ---------------------------------------------------------------------------

    def derive(self, ctx: RunContext, work: Work, budget: Budget) -> Derived:
        from everos_reflect.llm.tasks import NeedsLLM

        rt, ref, state = ctx.runtime, work.ref, work.state
        assert isinstance(state, LessonState)
        derived = Derived()
        tasks = state.live_tasks()
        window = set(work.items)
        by_type: dict[str, list[TaskRecord]] = defaultdict(list)
        for task in tasks:
            by_type[task.task_type].append(task)
        touched: set[Path] = set()
        # Every task type is asked before anything is written: a call failing after another
        # type's lessons were written left them on disk under a run recorded failed, and the
        # next run took them for an interrupted commit and moved the cursor past the types
        # that never got their lessons.
        asked: dict[str, list[learning.Candidate]] = {}
        for task_type in sorted({t.task_type for t in tasks if t.id in window}):
            shown = [t for t in by_type[task_type] if t.id in window]
            try:
                asked[task_type] = self._llm_candidates(ctx, budget, task_type, shown, derived)
            except ProviderUnavailable as exc:
                if not exc.permanent:
                    raise
                ids = [t.id for t in shown]
                raise SetAside(f"{exc}; set aside: {', '.join(ids)} (the {task_type!r} tasks "
                               "are sent again once edited, or the prompts or model change)",
                               {i: work.items[i] for i in ids}, exc.usage) from exc
            except NeedsLLM:
                asked[task_type] = learning.offline_candidates(
                    by_type[task_type], min_recurrence=int(ctx.settings["min_recurrence"]))
                derived.provider, derived.model = "extractive", None
        for task_type, candidates in asked.items():
            try:
                plan = self._plan(rt, state, task_type, candidates, ctx.settings)
                if plan.handwritten:
                    ctx.log.info("%s: %s: %s a hand-written %s lesson, left unchanged",
                                 self.name, ref, counted(plan.handwritten, "candidate")
                                 + (" restates" if plan.handwritten == 1 else " restate"),
                                 task_type)
                for lesson_id, keys in plan.garbled.items():
                    ctx.log.warning(
                        "%s: %s: lesson %s in %s: %s is not a list of ids (a hand edit?): the "
                        "lesson is left unchanged, not confirmed; write it as [id, ...]",
                        self.name, ref, lesson_id, rt.store.rel(rt.store.path_for_id(
                            ref, lesson_id)), " and ".join(keys))
                written, paths = self._apply(rt, ref, work.key, task_type, plan, state)
                derived.outputs += written
                touched |= paths
                touched |= decide_contests(rt, ref, LessonState.load(rt, ref), task_type,
                                           int(ctx.settings["contest_margin"]))
            except Exception as exc:  # an OSError on the log, a bug a hand edit trips
                if rt.root_gone():
                    raise
                # that type alone fails: its tasks stay in the window for the next run (the
                # commit intent no longer holds them, so a crash from here on cannot consume
                # them either); the types after it are still learned from
                ctx.log.error("%s: %s: the %r lessons could not be written: %s", self.name,
                              ref, task_type, exc, exc_info=None
                              if isinstance(exc, EverosError) else exc)
                derived.failures.append(f"task type {task_type!r}: {describe(exc)}")
                derived.pending |= {t.id for t in by_type[task_type] if t.id in window}
                cursors.begin_intent(rt.db(), self.name, ref, work.key, {
                    i: h for i, h in work.items.items() if i not in derived.pending},
                    ctx.run_id)
        sync(rt, touched)
        return derived

    def _llm_candidates(self, ctx: RunContext, budget: Budget, task_type: str,
                        shown: Sequence[TaskRecord], derived: Derived
                        ) -> list[learning.Candidate]:
        from everos_reflect.llm.tasks import Record

        records = [Record(t.id, "task", t.text(), t.timestamp) for t in shown]
        reply = self.call(ctx, budget, records, {"task_type": task_type}, derived)
        # the oldest tasks that fit the prompt budget are shown, the rest wait for a run
        cited = tuple(t.id for t in shown if t.id not in derived.left_out)
        refusals = Refusals(ctx.log, f"{self.name}: {task_type!r}")
        # a text the reply both asks to do and to avoid says nothing the tasks could decide
        # (both cite the same tasks): written, it made two contested lessons of one sentence,
        # each "confirmed" by every task shown, served side by side
        # (a text refused for itself, too long or holding a control character, is refused so
        # on each side, as before)
        both = ({beliefs.text_key(t) for t in reply["lessons"]
                 if beliefs.text_problem(t.strip()) is None}
                & {beliefs.text_key(t) for t in reply["avoid"]
                   if beliefs.text_problem(t.strip()) is None})
        out = []
        for key, kind in (("lessons", "do"), ("avoid", "avoid")):
            for text in dict.fromkeys(s.strip() for s in reply[key]):
                if not text:
                    continue
                if (problem := beliefs.text_problem(text)) is not None:
                    refusals.add(f"lesson refused: {problem}")  # that one alone
                    continue
                if beliefs.text_key(text) in both:
                    if kind == "do":  # the pair is named once
                        refusals.add("lesson refused: the reply asks both to do and to avoid "
                                     f"{quoted_value(text[:200])}")
                    continue
                out.append(learning.Candidate(text, kind, cited))
        derived.take(refusals)
        return out

    def _plan(self, rt: Runtime, state: LessonState, task_type: str,
              candidates: Sequence[learning.Candidate], settings: Mapping[str, Any]) -> _Plan:
        plan = _Plan({}, [])
        stamps = state.task_stamps()
        existing = state.live_lessons(task_type)
        # text only: a hand-written list or mapping there was unhashable, and the TypeError
        # stopped the run for every owner, on every run
        by_signature = {sig: x for e in state.lessons
                        if isinstance(sig := e.meta.get("signature"), str) and sig
                        and (x := read_lesson(e)).live and x.task_type == task_type}
        texts = [c.text for c in candidates] + [x.text for x in existing]
        vectors = rt.embedder.embed(texts) if texts else []
        pool: list[tuple[Lesson, np.ndarray]] = [
            (x, vectors[len(candidates) + n]) for n, x in enumerate(existing)]
        for n, cand in enumerate(candidates):
            if cand.signature:  # offline lessons state counts: matched by what they count only
                target = by_signature.get(cand.signature)
                decision = (learning.Decision("restate", cand, target, 1.0) if target
                            else learning.Decision("new", cand))
            else:
                decision = learning.classify(
                    cand, vectors[n], pool, restate=float(settings["restate_similarity"]),
                    related=float(settings["related_similarity"]))
            if decision.action == "restate" and decision.target is not None:
                old = decision.target
                if old.id.startswith("?"):  # restates a lesson of this same batch
                    i = int(old.id[1:])
                    c, status, prev = plan.new[i]
                    merged = tuple(dict.fromkeys(c.evidence + cand.evidence))
                    plan.new[i] = (learning.Candidate(c.text, c.lesson_type, merged,
                                                      c.signature, c.count), status, prev)
                    continue
                before, count = plan.confirm.get(old.id, (old.evidence, old.confirmations))
                fresh = tuple(t for t in cand.evidence if t not in before)
                if cand.signature:  # an offline count is the count, not an increment
                    count = max(count, cand.count)
                else:
                    count += len(fresh)
                if old.ours and old.garbled:
                    plan.garbled[old.id] = old.garbled
                elif not old.ours:
                    plan.handwritten += 1
                elif ((cited := latest(before + fresh, stamps)) != old.evidence
                      or count != old.confirmations):
                    plan.confirm[old.id] = (cited, count)
                continue
            status = CONTESTED if decision.action == "contradict" else ACTIVE
            target = decision.target if decision.action in ("refine", "contradict") else None
            if decision.action == "refine" and target is not None and target.id.startswith("?"):
                # refines a lesson of this same batch, never written: write the refined text
                # in its place (writing both would leave the first live beside the second)
                i = int(target.id[1:])
                c, first_status, prev = plan.new[i]
                merged = tuple(dict.fromkeys(c.evidence + cand.evidence))
                plan.new[i] = (learning.Candidate(cand.text, cand.lesson_type, merged,
                                                  cand.signature, cand.count), first_status,
                               prev)
                continue
            placeholder = Lesson(f"?{len(plan.new)}", task_type, cand.lesson_type, cand.text,
                                 cand.evidence)
            plan.new.append((cand, status, target))
            pool.append((placeholder, vectors[n]))
        return plan

    def _apply(self, rt: Runtime, ref: UserRef, key: str, task_type: str,
               plan: _Plan, state: LessonState) -> tuple[list[str], set[Path]]:
        store, touched = rt.store, set()
        hashes = _Hashes(state)
        confirmed = {}
        for lesson_id, (evidence, count) in plan.confirm.items():
            evidence = latest(evidence, hashes.stamps)
            confirmed[lesson_id] = {"evidence": list(evidence), "confirmations": count,
                                    "evidence_hash": hashes.of(evidence, lesson_id)}
        store.update_metas(ref, confirmed)  # one write per log, not one per lesson
        touched |= {store.path_for_id(ref, lesson_id) for lesson_id in confirmed}
        if not plan.new:
            return [], touched
        # A lesson contradicting another of this batch names it by its place in the batch
        # ("?0"), which has no id before the write: the store gives the batch its ids under
        # the log's lock and `refer` puts them in, on both sides of each such contest. Written
        # one after the other, each waiting for the id of the one it contests, a chain of n
        # lessons contesting each other cost n appends and n - 1 updates of the other side,
        # each a copy of the whole log: n² bytes for one run.
        contested_by: dict[str, list[str]] = defaultdict(list)
        for n, (_, status, old) in enumerate(plan.new):
            if status == CONTESTED and old is not None and old.id.startswith("?"):
                contested_by[old.id].append(f"?{n}")
        rows = []
        for n, (cand, status, old) in enumerate(plan.new):
            meta, sections = self._row(key, task_type, cand, status, old, hashes)
            if later := contested_by.get(f"?{n}"):
                meta["status"] = CONTESTED
                meta["contested_with"] = [*meta.get("contested_with", ()), *later]
            rows.append((meta, sections))

        def refer(_: int, meta: Mapping[str, Any], ids: list[str]) -> Mapping[str, Any]:
            named = meta.get("contested_with")
            if not named:
                return meta
            return {**meta, "contested_with": [ids[int(i[1:])] if i.startswith("?") else i
                                               for i in named]}

        written = store.append_many(ref, Kind.LESSON, rows, derived=True, refer=refer)
        written_ids = [e.id for e in written]
        touched |= {store.path_for_id(ref, e.id) for e in written}
        touched |= repair_lessons(rt, ref, LessonState.load(rt, ref))
        return written_ids, touched

    @staticmethod
    def _row(key: str, task_type: str, cand: learning.Candidate, status: str,
             old: Lesson | None, hashes: _Hashes) -> tuple[dict[str, Any], dict[str, str]]:
        """One new lesson's metadata and section; ``old`` is what it refines or contradicts."""
        evidence = cand.evidence
        confirmations = cand.count or len(cand.evidence)
        if old is not None and status == ACTIVE:  # a refinement inherits what it refines
            evidence = tuple(dict.fromkeys(old.evidence + cand.evidence))
            confirmations = old.confirmations + len(set(cand.evidence) - set(old.evidence))
        meta = derived_meta(evidence=latest(evidence, hashes.stamps), depth=1, key=key, extra={
            "task_type": task_type, "lesson_type": cand.lesson_type,
            "confirmations": max(1, confirmations), "created_by": CREATED_BY,
            "signature": cand.signature,
            "supersedes": old.id if old is not None and status == ACTIVE else None,
            "contested_with": [old.id] if old is not None and status == CONTESTED else None,
        })
        meta["status"] = status
        meta["evidence_hash"] = hashes.of(
            meta["evidence"], old.id if old is not None and status == ACTIVE else None)
        # the timestamp stays, None: the store stamps it on the day of the log it writes
        return ({k: v for k, v in meta.items() if v is not None or k == "timestamp"},
                {"Lesson": cand.text})


class _Hashes:
    """``evidence_hash`` of a lesson written or confirmed (SPEC §10, as insights keep it):
    per task cited, :func:`~everos_reflect.strategies.provenance.cited_hash` of the task as
    read for this run, so provenance marks the lesson stale once a person edits the task
    (its outcome, a step) or it vanishes. A task the lesson (or the lesson it refines)
    already kept a hash of keeps that one: the lesson was learned from the task as it was
    then."""

    def __init__(self, state: LessonState) -> None:
        self.tasks = {e.id: e for e in state.tasks}
        self.stamps = state.task_stamps()
        self.kept = {e.id: evidence_hashes(e) for e in state.lessons}

    def of(self, evidence: Sequence[str], lesson_id: str | None) -> dict[str, str]:
        kept = self.kept.get(lesson_id, {}) if lesson_id else {}
        return {t: kept.get(t) or cited_hash(self.tasks[t]) for t in evidence
                if t in kept or t in self.tasks}


def _types_of(state: LessonState, items: Mapping[str, str]) -> dict[str, str]:
    """Task id → task type, for the window's tasks that have one (the ones a call asks about)."""
    return {e.id: t for e in state.tasks if e.id in items and (t := read_task(e).task_type)}


def _within_calls(state: LessonState, items: dict[str, str],
                  max_calls: int) -> tuple[dict[str, str], int]:
    """The window cut to the tasks of its first ``max_calls`` task types (one call each), and
    how many types wait for a later run. A window of every new task made one call per type:
    six types made six calls under ``max_llm_calls = 2``."""
    types = _types_of(state, items)
    kept = sorted(set(types.values()))[:max_calls]
    deferred = len(set(types.values())) - len(kept)
    if not deferred:
        return items, 0
    allowed = set(kept)
    return {i: h for i, h in items.items() if types.get(i) in allowed}, deferred


def repair_lessons(runtime: Runtime, ref: UserRef, state: LessonState) -> set[Path]:
    """Finish what a crash may have left half done after the append (idempotent): a live
    refinement archives the lesson it ``supersedes``; the other side of a new contested lesson
    is marked ``contested`` too (when this strategy wrote it)."""
    store, touched = runtime.store, set()
    lessons = {e.id: e for e in state.lessons}
    archive = {}
    updates: dict[str, dict[str, Any]] = {}  # one write per log (update_metas)
    for entry in state.lessons:
        lesson = read_lesson(entry)
        if not (lesson.ours and lesson.live):
            continue
        old_id = entry.meta.get("supersedes")
        old = lessons.get(str(old_id)) if old_id else None
        if old is not None and old.deprecated_by is None:
            archive[old.id] = entry.id
        for other_id in lesson.contested_with if lesson.status == CONTESTED else ():
            other = lessons.get(other_id)
            if other is None:
                continue
            theirs = read_lesson(other)
            named = updates.get(other_id, {}).get("contested_with", theirs.contested_with)
            if theirs.rewritable and theirs.live and lesson.id not in named:
                # two new lessons contesting one rival both land in its list
                updates[other_id] = {"status": CONTESTED, "contested_with": [*named, lesson.id]}
    if updates:
        store.update_metas(ref, updates)
        touched |= {store.path_for_id(ref, i) for i in updates}
    if archive:
        store.deprecate(ref, archive)
        touched |= {store.path_for_id(ref, old) for old in archive}
    return touched


def decide_contests(runtime: Runtime, ref: UserRef, state: LessonState, task_type: str,
                    margin: int) -> set[Path]:
    """Settle contested pairs the tasks have decided: the side ahead by ``margin``
    confirmations becomes active again, the other is retired with the reason."""
    store = runtime.store
    updates: dict[str, dict[str, Any]] = {}  # applied in one write per log, in this order

    def update(lesson_id: str, values: dict[str, Any]) -> None:
        updates.setdefault(lesson_id, {}).update(values)

    live = {x.id: x for x in state.live_lessons(task_type)}
    archived = {e.id: e.deprecated_by for e in state.lessons if e.deprecated_by}
    for lesson in list(live.values()):
        if lesson.status != CONTESTED or not lesson.rewritable:
            continue
        rivals = [live[i] for i in live_rivals(lesson, live, archived)]
        if not rivals:
            # Every rival retired, withdrawn or deleted (by hand, say): nothing is left to
            # decide, and the lesson stayed `contested` for good, at any count.
            update(lesson.id, {"status": ACTIVE, "contested_with": None})
            continue
        top = max(r.confirmations for r in rivals)
        if lesson.confirmations >= top + margin:
            for rival in rivals:
                if rival.rewritable:
                    update(rival.id, {
                        "status": RETIRED, "retired_at": datetime.now(UTC),
                        "stale_reason": f"contradicted by {lesson.id}, confirmed "
                                        f"{lesson.confirmations}x against {rival.confirmations}x"})
            update(lesson.id, {"status": ACTIVE, "contested_with": None})
    store.update_metas(ref, updates)
    return {store.path_for_id(ref, i) for i in updates}


__all__ = ["MAX_TASK_PROMPT_CHARS", "NAME", "LearnLessons", "LessonState", "decide_contests",
           "repair_lessons"]
