"""``reflect_episodes``: merge each eligible cluster into one narrative (SPEC §5).

One run: bring the index up to date with the Markdown, finish or abandon merges a crash
interrupted, then for every user with clusters, largest eligible cluster first:
**Select → Merge → Re-extract → coverage guard → Deprecate**.

Pipelined: the LLM calls of later clusters (of any user) are in flight, at most
``llm.max_concurrency`` at once, while earlier clusters commit. A worker drafts one cluster (merge
and re-extract) and hands the draft to the guard's thread (:mod:`reflect_guard`), which embeds
for every draft waiting at once and measures them (coverage, sentence attribution); the worker
goes on to its next LLM call. Up to ``max_drafts_ahead`` clusters are drafted ahead of the
commit. Everything that writes the memory root happens on the run's own thread, in selection
order: the drafts ready together (up to ``max_commit_batch``, waiting at most
``commit_wait_seconds`` for the ones behind the first; not in the last rounds of a run against
a model over the network, so that only the last drafts commit after the last reply) are
committed as one batch (:mod:`journal_batch`), each merge with its own journal row passing
through the same crash-safe steps as a merge committed alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from everos_reflect.clustering.service import ClusterInfo, ClusterService
from everos_reflect.engine.registry import (
    RunContext,
    SettingSpec,
    Strategy,
    count_between,
    duration_up_to,
)
from everos_reflect.errors import ConfigError, ProviderUnavailable, describe
from everos_reflect.index import cursors, reads
from everos_reflect.index.db import transaction
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.base import LLM, Usage
from everos_reflect.llm.prompts import Prompts, language_problem
from everos_reflect.llm.switching import prompt_replies
from everos_reflect.model import UserRef, quoted_value
from everos_reflect.problem_words import counted
from everos_reflect.strategies import holdback, journal, journal_batch
from everos_reflect.strategies.aside import llm_target, prompt_budget
from everos_reflect.strategies.belief_store import set_aside_error
from everos_reflect.strategies.consolidate import (
    Draft,
    Selection,
    draft,
    fit_prompt,
    select,
    unsupported_numbers,
)
from everos_reflect.strategies.invented import unsupported_names
from everos_reflect.strategies.reflect_guard import Facts as _Facts
from everos_reflect.strategies.reflect_guard import Guard

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

NAME = "reflect_episodes"

#: Defaults of the coverage guard, measured with the bundled MiniLM embedder by
#: ``bench/coverage_floor.py`` (method and figures in docs/reflection.md). The match
#: threshold stays below the extractive merge's fold threshold (0.78): a model merging two
#: facts writes them in one sentence, and each then sits at 0.67-0.80 to it, the range of the
#: distinct pairs 0.78 would stop crediting (``bench/fold_pairs.py``, coverage credit: on its
#: calibration half 0.78 credits one lost fact less and one honest merge less). What a
#: cosine cannot tell apart, a fact about someone's brother counted as stated by one about
#: them, the guard refuses by the sentences' holders (``llm.extractive.different_holders``).
DEFAULT_FACT_MATCH_THRESHOLD = 0.75
DEFAULT_MIN_FACT_COVERAGE = 0.6
#: A narrative longer than this share of its sources' words saves nothing and is rejected.
DEFAULT_MAX_NARRATIVE_RATIO = 1.0
#: Clusters drafted ahead of the one committing. Each waiting draft is a few KB; enough that
#: the LLM never waits for a slow commit, nor for the guard catching up on a burst of drafts,
#: at the default ``llm.max_concurrency`` (4): 32 clusters are 64 calls, ~5 s at 300 ms each
#: (16 left the LLM waiting for the local work on a loaded 2-core machine).
DEFAULT_MAX_DRAFTS_AHEAD = 32
#: Ready drafts committed together at most (the merges of one batch share each file's write,
#: the index update and the transactions; more would only delay the first of them).
DEFAULT_MAX_COMMIT_BATCH = 16
#: The most drafts ahead, and drafts in one commit batch, a setting may ask for. Each draft
#: ahead holds its cluster's sources and facts in memory while the LLM works through the
#: ones before it: 10**12 was accepted and selected every cluster the run's limits allowed
#: up front; a thousand is far past what any model server drafts at once.
MAX_DRAFTS = 1_000
#: How long a ready draft waits for the ones behind it: a batch's writes cost little more than
#: one merge's, and the LLM keeps drafting meanwhile (32 drafts ahead), so only the commit of
#: each merge is later, never the run.
DEFAULT_COMMIT_WAIT_SECONDS = 1.0
#: LLM calls one cluster's merge makes (merge + facts): the run starts a cluster only while
#: ``max_llm_calls`` leaves room for all of them.
CALLS_PER_MERGE = 2
#: Rounds of the workers (one cluster each) left at which a run against a model over the
#: network commits its ready drafts at once rather than wait ``commit_wait_seconds`` for the
#: ones behind them.
ENDGAME_ROUNDS = 3
#: The longest the guard's start-up work (model load, index import) waits for the run's first
#: LLM requests to be out (they normally are ~0.1 s after the run starts).
FIRST_REQUESTS_WAIT_SECONDS = 1.0
#: The most sources one merge folds in. A narrative lists every entry it replaces in its
#: ``sources`` metadata, which the parser reads only up to 64 KiB: past ~3,400 sources the
#: list alone overflowed it, and the store refused every such narrative (the merge stayed
#: "interrupted", retried each run). 1,000 ids of any width the store writes fit with room.
MAX_SOURCES_PER_MERGE = 1_000


def _sources_per_merge(value: int) -> str | None:
    """At least 2 (a merge takes two Episodes; at 1 every first "merge" rewrote a single
    Episode into a narrative of one source and archived it, merging nothing), at most
    :data:`MAX_SOURCES_PER_MERGE`; a larger cluster is merged in parts, run after run."""
    if 2 <= value <= MAX_SOURCES_PER_MERGE:
        return None
    return f"must be 2 to {MAX_SOURCES_PER_MERGE:,}, got {value}"


#: The most a narrative may be longer than its sources (``max_narrative_ratio``). 1e308 was
#: accepted: with a prompt budget (any ``openai`` provider) every cluster's fact-extraction
#: estimate overflowed ("cannot convert float infinity to integer"), failing every run.
MAX_NARRATIVE_RATIO = 100.0


def _narrative_ratio(value: float) -> str | None:
    if 0 < value <= MAX_NARRATIVE_RATIO:
        return None
    return f"must be greater than 0 and at most {MAX_NARRATIVE_RATIO:g}, got {value:g}"


#: The most ``max_clusters_per_run``: a million clusters, two million Episodes or more of
#: one user, past any memory (10**12 was taken, a cap that capped nothing).
MAX_CLUSTERS_PER_RUN = 1_000_000


def _unit_interval(value: float) -> str | None:
    return None if 0.0 <= value <= 1.0 else f"must be between 0 and 1, got {quoted_value(value)}"




def _prompts_problem(value: Mapping[str, Any]) -> str | None:
    try:
        Prompts.from_settings({"prompts": value}, section=None)
    except ConfigError as exc:
        return "; ".join(f"{where}: {reason}" for _, where, reason in exc.problems)
    return None


class ReflectEpisodes(Strategy):
    """The Reflection strategy. Stateless: everything it needs lives in the memory root."""

    name = NAME
    description = "Merge each cluster of similar Episodes into one narrative (Reflection)."
    default_cron = "0 2 * * 1"
    # A cluster whose LLM call failed, or whose commit was interrupted, failed; a rejected or
    # stale one was handled as designed (nothing written, retried next run) -- unless every
    # cluster was rejected or failed, which says the LLM's answers are unusable (run failed).
    # An interrupted merge that recovery could not settle yet (its row stays) is a failure too:
    # the run record, not only the log, must say a merge is stuck.
    # A merge's copy in another user's folder that could not be settled (its narrative's id
    # another entry's there) is a unit failed too: logged alone, no run record said it.
    failure_counts = ("failed", "interrupted", "recovered_unrecovered", "copy_conflicts")
    rejection_counts = ("rejected",)
    unit_counts = ("merged", "failed", "interrupted", "rejected", "stale",
                   "recovered_unrecovered", "copy_conflicts")
    idle_counts = ("held_back", "deferred_sources")
    # merges the recovery before a run settled: a run that only recovered one, and could not
    # settle a copy of it, did not fail "every unit"
    recovery_counts = ("recovered_ok", "recovered_abandoned", "recovered_rejected",
                       "recovered_copy_settled")
    settings = (
        SettingSpec("max_clusters_per_run", int, 10,
                    "Clusters merged per user per run, largest first.",
                    count_between(1, MAX_CLUSTERS_PER_RUN, "clusters of one user in one run")),
        SettingSpec("max_sources_per_merge", int, 50,
                    "Episodes folded into one merge, oldest first; the rest wait for a later "
                    "run.", _sources_per_merge),
        SettingSpec("min_fact_coverage", float, DEFAULT_MIN_FACT_COVERAGE,
                    "Reject a merge whose facts state less than this share of the sources' "
                    "facts.", _unit_interval),
        SettingSpec("fact_match_threshold", float, DEFAULT_FACT_MATCH_THRESHOLD,
                    "Cosine at which a source fact counts as still stated.", _unit_interval),
        SettingSpec("max_narrative_ratio", float, DEFAULT_MAX_NARRATIVE_RATIO,
                    "Reject a merge whose narrative has more than this share of its sources' "
                    "words (1.0: never longer than the sources).", _narrative_ratio),
        SettingSpec("reject_invented_numbers", bool, True,
                    "Reject a merge whose narrative or facts state a number (a year, an age, "
                    "an amount) that none of its sources states."),
        SettingSpec("reject_invented_names", bool, True,
                    "Reject a merge whose narrative or facts name a person, place or thing, "
                    "or write a month, weekday or day in words, that none of its sources "
                    "states (capitalised words; English sources only for names)."),
        SettingSpec("language", str, "auto",
                    "Narrative language: auto (the input's) or a language name.", language_problem),
        SettingSpec("prompts", dict, {},
                    "Prompt overrides: system, merge_init, merge_update, extract_facts.",
                    _prompts_problem),
        SettingSpec("max_drafts_ahead", int, DEFAULT_MAX_DRAFTS_AHEAD,
                    "Clusters drafted by the LLM ahead of the one being written (at most "
                    "llm.max_concurrency calls in flight; never fewer than that).",
                    count_between(1, MAX_DRAFTS)),
        SettingSpec("max_commit_batch", int, DEFAULT_MAX_COMMIT_BATCH,
                    "Drafts ready at the same time that are written together: one Markdown "
                    "write per file, one index update, one transaction (each merge keeps its "
                    "own journal row).", count_between(1, MAX_DRAFTS)),
        SettingSpec("commit_wait_seconds", float, DEFAULT_COMMIT_WAIT_SECONDS,
                    "How long a ready draft waits for the drafts right behind it to be ready "
                    "too, so they commit together (0: commit whatever is ready).",
                    duration_up_to(3_600, "an hour")),
        SettingSpec("remerge_undone", bool, False,
                    "Merge the sources of an undone merge again even when no new member has "
                    "joined them (normally they are held back until one does)."),
    )

    def run(self, ctx: RunContext) -> dict[str, int]:
        return ReflectionRun(ctx).run()

    def idle_reason(self, runtime: Runtime, settings: Mapping[str, Any],
                    counts: Mapping[str, int]) -> str | None:
        """No cluster awaited a merge, or those that did are held back after an undo, or
        set aside after the server refused them for good (:meth:`Strategy.idle_reason`)."""
        from everos_reflect.strategies.setaside import set_aside_clusters

        held = int(counts.get("held_back", 0))
        if held:
            return (f"{counted(held, 'cluster')} held back after an undo "
                    f"{'waits' if held == 1 else 'wait'} for a new member "
                    "(remerge_undone = true merges them)")
        aside = len(set_aside_clusters(runtime))
        if aside:
            return (f"no cluster awaits a merge but {aside} set aside: the server refused "
                    "their merge for good (`status` lists them)")
        return ("no new Episodes to merge: no cluster of 2 or more live Episodes was formed "
                "or joined by a new Episode since the last merge")

    def recover(self, runtime: Runtime) -> dict[str, int]:
        """Finish or abandon the merges a crash interrupted (:func:`journal.recover`)."""
        return self._recover(runtime, None)

    def recover_for_run(self, ctx: RunContext) -> dict[str, int]:
        """:meth:`recover` before a run: a merge it could not settle, and a copy of a merge
        it could not settle, are named in the run record too (counted alone, the record said
        ``copy_conflicts=1`` and nothing of which copy, nor why)."""
        return self._recover(ctx.runtime, ctx)

    def _recover(self, runtime: Runtime, ctx: RunContext | None) -> dict[str, int]:
        counts: Counter[str] = Counter()
        merged: set[UserRef] = set()
        for outcome in journal.recover(runtime, Indexer(runtime)):
            counts[f"recovered_{outcome.status}"] += 1
            if outcome.copy_problems:  # why: in the merge's audit row
                counts["copy_conflicts"] += len(outcome.copy_problems)
            if ctx is not None:
                _name_recovery_failures(ctx, outcome)
            if outcome.status == "ok":
                merged.add(outcome.plan.ref)
        # as a run's own merges (ReflectionRun.run): the next run may merge nothing of theirs;
        # and the users whose placing a process killed after their merges (or after a sync
        # pass that founded a narrative's cluster) left owed
        ClusterService(runtime).settle_owed(merged)
        return dict(counts)

    def has_interrupted(self, root: Path) -> bool:
        return journal.has_pending(root)


def _name_recovery_failures(ctx: RunContext, outcome: journal.Outcome) -> None:
    """Name in the run record what the recovery before the run could not settle: the merge
    (its row stays), or a copy of it in another user's folder; each said as the recovery's,
    with what became of the merge itself (``ok``: finished); the copy's problem names both
    users (a record quotes 200 characters of each: the ids and why come first)."""
    plan = outcome.plan
    if outcome.status == journal.UNRECOVERED:
        ctx.note_failure(f"merge {plan.id} of {plan.ref}",
                         f"interrupted, not recovered yet (retried next run): {outcome.error}")
    for problem in outcome.copy_problems:
        ctx.note_failure(f"merge {plan.id} recovered ({outcome.status})", problem)


@dataclass
class _Prepared:
    """A draft measured by its worker: the facts it was measured against and the verdicts."""

    draft: Draft
    facts: _Facts
    too_long: str | None
    #: the provider's own provenance (None for prose), kept in case the draft is re-measured
    provenance_given: tuple[tuple[str, ...], ...] | None = None


class ReflectionRun:
    """One run's state: the runtime, its settings, the counts it reports."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.rt: Runtime = ctx.runtime
        s = ctx.settings
        self.max_clusters = int(s.get("max_clusters_per_run", 10))
        # read as status and clusters read them, so they report the holds this run applies
        rules = holdback.HoldRules.from_settings(s)
        self.remerge_undone, self.max_sources = rules.remerge_undone, rules.max_sources
        self.floor = float(s.get("min_fact_coverage", DEFAULT_MIN_FACT_COVERAGE))
        self.match = float(s.get("fact_match_threshold", DEFAULT_FACT_MATCH_THRESHOLD))
        self.max_ratio = float(s.get("max_narrative_ratio", DEFAULT_MAX_NARRATIVE_RATIO))
        self.check_numbers = bool(s.get("reject_invented_numbers", True))
        self.check_names = bool(s.get("reject_invented_names", True))
        self.max_ahead = int(s.get("max_drafts_ahead", DEFAULT_MAX_DRAFTS_AHEAD))
        self.max_batch = int(s.get("max_commit_batch", DEFAULT_MAX_COMMIT_BATCH))
        self.commit_wait = float(s.get("commit_wait_seconds", DEFAULT_COMMIT_WAIT_SECONDS))
        self.prompts = Prompts.from_settings(
            {"language": s.get("language", "auto"), "prompts": s.get("prompts") or {}})
        #: estimated tokens one merge request may hold (None: the provider sends no prompt)
        self.budget = prompt_budget(self.rt)
        self.counts: Counter[str] = Counter()
        self.log = ctx.log
        self._named: set[UserRef] = set()  # users the run record names as failed
        self._merged_users: set[UserRef] = set()  # users with a merge committed in this run
        self._first: FirstRequests | None = None  # set while a run has LLM calls to make
        self._prefetch_sources = False
        self.guard = Guard(self.rt, match_threshold=self.match, max_ratio=self.max_ratio,
                           hold=self._first_requests_out)

    def _first_requests_out(self) -> None:
        """The guard's start-up threads: wait until the run's first LLM requests are out."""
        if self._first is not None:
            self._first.wait()

    def run(self) -> dict[str, int]:
        # Interrupted merges were settled just before, under this run's lock: the engine calls
        # ReflectEpisodes.recover before every run (recovering here again redid the work, and
        # retried and logged every merge that cannot be settled twice per run).
        indexer = Indexer(self.rt)
        self.ctx.logs_indexed += indexer.scan().logs_indexed
        # copies of merges settled earlier, finished after their rows went, which the scan
        # made known (recovery, before it, looked at what the index knew then)
        for outcome in journal.settle_copies_left(self.rt, indexer):
            self.counts[f"recovered_{outcome.status}"] += 1
            for problem in outcome.copy_problems:
                self.counts["copy_conflicts"] += 1
                self.ctx.note_failure(str(outcome.plan.ref), problem)
        # a merge reads its sources' logs to select, check and archive them: each parsed once
        with self.rt.store.holding_more_parses():
            self._merge_all(indexer, self.ctx.llm,  # every call charged to the run's limits
                            self._selections(ClusterService(self.rt)))
        # as a reindex places them, now that narratives stand for their sources (and the
        # users a killed run or sync pass still owed)
        ClusterService(self.rt).settle_owed(self._merged_users)
        return dict(self.counts)

    def _selections(self, clusters: ClusterService) -> Iterator[Selection]:
        """Every user's chosen clusters, largest first, made lazily on the run's thread: a
        user's clusters are selected only when the pipeline has room for them."""
        for ref in users_with_clusters(self.rt):
            if self.ctx.should_stop() or self.ctx.budget.hit:
                return
            # one user's unexpected error (a hand-edited record that trips a bug) fails that
            # user alone: the users after it are still selected
            at: list[ClusterInfo] = []  # the cluster being selected, for its failed row
            try:
                yield from self._user_selections(clusters, ref, at)
            except Exception as exc:
                if self.rt.root_gone():  # not this user's fault: the engine says so
                    raise
                self._selection_failed(ref, at[0] if at else None, exc)

    def _user_selections(self, clusters: ClusterService, ref: UserRef,
                         at: list[ClusterInfo]) -> Iterator[Selection]:
        """``ref``'s chosen clusters, largest first (``at``: the one being looked at)."""
        waiting = {p.cluster_id for p, _ in journal.pending(self.rt.db())}
        undone = set() if self.remerge_undone else holdback.undone_sources(self.rt.db(), ref)
        aside = cursors.consumed(self.rt.db(), NAME, ref)  # refused for good, unchanged
        beside: dict[str, set[str]] | None = None  # read once, for its first eligible cluster
        chosen = 0
        # every eligible cluster is looked at, so held-back ones never starve the others
        for info in clusters.eligible_for_reflection(ref, 1 << 30):
            if chosen >= self.max_clusters:
                break
            at[:] = [info]
            if beside is None:  # live narratives beside live entries they name (a hand edit)
                beside = reads.live_narratives_beside(self.rt.db(), ref)
            picked = self._pick(clusters, info, waiting, undone, aside, beside)
            at.clear()
            if picked is not None:
                chosen += 1
                self.counts["deferred_sources"] += picked.deferred
                yield picked

    def _pick(self, clusters: ClusterService, info: ClusterInfo, waiting: set[str],
              undone: set[str], aside: set[tuple[str, str]],
              beside: Mapping[str, set[str]]) -> Selection | None:
        """What to merge of one eligible cluster, or None: a merge of it awaits recovery
        (``waiting``), it holds the sources of an undone merge (``undone``), Markdown leaves
        nothing to do, or the server refused exactly this for good (``aside``). ``beside``:
        the user's live narratives by the live entries they name (:func:`select`)."""
        if info.cluster_id in waiting:  # a merge of it still awaits recovery
            return None
        if undone and holdback.is_held(holdback.candidates(
                self.rt.db(), info.cluster_id, info.consolidated_entry_id), undone):
            self.counts["held_back"] += 1  # undone; waits for a new member
            return None
        picked = select(self.rt.store, clusters, info, max_sources=self.max_sources,
                        beside=beside)
        if picked is not None and undone and not picked.deferred \
                and holdback.is_held(picked.source_ids, undone):
            # the member that released the hold is not among what Markdown gives to merge (its
            # log cannot be read now): the merge would be the undone one again
            self.counts["held_back"] += 1
            return None
        if picked is None or (picked.cluster_id, self._aside_key(picked)) in aside:
            return None  # the server (or the prompt budget) refused this exact cluster for good
        fitted, too_big = fit_prompt(picked, self.prompts, self.budget, self.max_ratio)
        if too_big is not None:  # nothing of it fits one request: set aside, never sent
            self._failed(picked, self.ctx.llm, too_big, None, set_aside=True,
                         back="once a member is edited, joins or leaves, or the prompts, "
                         "model or llm.max_prompt_tokens change")
            return None
        if fitted is not picked:
            self.counts["split_to_fit"] += 1
            self.log.info("cluster %s of %s: merging its %d oldest of %d sources, the most "
                          "whose prompt fits llm.max_prompt_tokens (%d); the rest follow in "
                          "later runs", fitted.cluster_id, fitted.ref, len(fitted.sources),
                          len(picked.sources), self.budget)
            if (fitted.cluster_id, self._aside_key(fitted)) in aside:
                return None  # the server refused this part for good
        return fitted

    def _selection_failed(self, ref: UserRef, info: ClusterInfo | None,
                          exc: Exception) -> None:
        """Selecting ``ref``'s clusters raised (at ``info``, when known): that user is failed
        for this run, its clusters left as they are. Counted ``failed``, named in the run
        record, logged with the traceback, and the cluster's report row says so."""
        error = describe(exc)
        where = f"cluster {info.cluster_id}: " if info is not None else ""
        self.log.error("%s: %sselecting failed: %s", ref, where, error, exc_info=exc)
        self.counts["failed"] += 1
        self._name_failed(ref, where + error)
        if info is None:
            return
        conn = self.rt.db()
        with transaction(conn):
            journal.insert_report(conn, run_id=self.ctx.run_id, ref=ref,
                                  cluster_id=info.cluster_id,
                                  mode="update" if info.consolidated_entry_id else "init",
                                  sources=[], status="failed", error=error)

    def _name_failed(self, ref: UserRef, error: str) -> None:
        """Name ``ref`` in the run record with the first of its failures in this run (its
        audit rows say every one)."""
        if ref not in self._named:
            self._named.add(ref)
            self.ctx.note_failure(str(ref), error)

    def _merge_all(self, indexer: Indexer, llm: LLM, chosen: Iterator[Selection]) -> None:
        """Drafts in a pool (``llm.max_concurrency`` workers, up to ``max_drafts_ahead``
        queued), measured by the guard's own thread, committed in selection order on this
        thread, several at a time. The next drafts are queued before a commit starts, so the
        LLM keeps working while it runs. ``should_stop`` is checked between clusters."""
        workers = max(1, int(self.rt.settings.llm.max_concurrency))
        ahead = max(workers, self.max_ahead)
        calls = CALLS_PER_MERGE if getattr(llm, "metered", True) else 0
        # a model over the network: its replies must not wait for the run's Python work
        replies = prompt_replies() if calls else nullcontext()
        # the guard's model load and index import wait for the first requests (not for the
        # offline provider's calls: they are local work that needs the model too)
        self._first = FirstRequests(llm, FIRST_REQUESTS_WAIT_SECONDS) if calls else None
        # a client that says when its requests are out talks to a model over the network
        network = bool(calls) and getattr(llm, "wait_requests_sent", None) is not None
        # the texts of a cluster's sources are embedded while its merge call is in flight
        # (the offline provider gives its own provenance: no sentences to attribute)
        self._prefetch_sources = bool(calls)
        with (replies, self.guard,
              ThreadPoolExecutor(workers, thread_name_prefix="reflect-llm") as pool):
            flight: deque[tuple[Selection, Any, Future[_Prepared | None]]] = deque()
            selected_all = False

            def refill(limit: int = ahead) -> None:
                nonlocal selected_all
                while len(flight) < limit and not self.ctx.should_stop():
                    sel = next(chosen, None)
                    if sel is None:
                        selected_all = True
                        return
                    # a run limit stops the run between clusters, never one halfway: its
                    # calls are promised before it starts
                    unit = self.ctx.reserve_unit(calls)
                    if unit is None:
                        self.log.info("stopping early: %s", self.ctx.budget.hit)
                        return
                    self.ctx.budget.charge_records(len(sel.source_ids))
                    # read here: SQLite connections belong to their thread
                    facts = live_facts(self.rt, sel.ref, [e.id for e in sel.replaced])
                    prepared: Future[_Prepared | None] = Future()
                    pool.submit(self._prepare, sel, facts, unit, prepared)
                    flight.append((sel, unit, prepared))

            try:
                # one cluster per worker first: selecting holds the interpreter lock (a few
                # ms a cluster), and the first requests would wait for the clusters queued
                # behind them to be selected
                refill(workers)
            finally:  # the clusters whose first calls start now, one per worker
                if self._first is not None:
                    self._first.expect(len(flight))
            if self._first is not None:
                self._first.wait()
            refill()
            while flight:
                ready = [flight.popleft()]
                refill()
                if not self.ctx.should_stop():
                    wait([ready[0][2]])
                # the drafts right behind it join its commit, if they are ready within
                # commit_wait_seconds of it; but not at the end of a run against a model over
                # the network (fewer clusters left than ENDGAME_ROUNDS rounds of the
                # workers): the drafts ready commit while the last ones are at the LLM, and
                # only those commit after the last reply
                deadline = time.monotonic() + self.commit_wait
                while flight and len(ready) < self.max_batch and not self.ctx.should_stop():
                    endgame = (network and selected_all
                               and len(flight) < ENDGAME_ROUNDS * workers)
                    left = 0.0 if endgame else deadline - time.monotonic()
                    if not flight[0][2].done() and (
                            left <= 0 or not wait([flight[0][2]], timeout=left).done):
                        break
                    ready.append(flight.popleft())
                    refill()
                self._commit_ready(indexer, llm, ready)

    def _commit_ready(self, indexer: Indexer, llm: LLM,
                      ready: list[tuple[Selection, Any, Future[_Prepared | None]]]) -> None:
        """Wait for the drafts of ``ready`` (in selection order), check each, and commit those
        that pass in one batch (:func:`journal_batch.commit_many`)."""
        plans: list[tuple[journal.Plan, _Prepared]] = []
        try:
            for sel, _, future in ready:
                if self.ctx.should_stop():
                    future.cancel()
                    continue
                usage = None  # what the draft's calls cost, once it is made
                try:
                    prepared = future.result()
                    # a bug a hand-edited record trips while the draft is made or checked
                    # fails that cluster alone, as a failed call does (nothing is written yet)
                    if prepared is not None:
                        usage = prepared.draft.usage
                    plan = self._plan(prepared) if prepared is not None else None
                except ProviderUnavailable as exc:
                    self._failed(sel, llm, str(exc), exc.usage, set_aside=exc.permanent)
                    continue
                except Exception as exc:
                    if self.rt.root_gone():  # not this cluster's fault: the engine says so
                        raise
                    self.log.error("cluster %s of %s: unexpected error", sel.cluster_id,
                                   sel.ref, exc_info=exc)
                    self._failed(sel, llm, describe(exc), usage)
                    continue
                if prepared is not None and plan is not None:
                    plans.append((plan, prepared))
            if plans:
                self._commit(indexer, plans)
        finally:
            for _, unit, _ in ready:
                unit.close()

    # -- one cluster ----------------------------------------------------------------------------

    def _prepare(self, sel: Selection, facts: _Facts, llm: LLM,
                 prepared: Future[_Prepared | None]) -> None:
        """Worker thread: the LLM draft, then hand it to the guard's thread, which measures it
        (embeddings, batched with the drafts finished meanwhile) and completes ``prepared``.
        The worker is free for the next LLM call at once. ``prepared`` fails with
        ProviderUnavailable, or gets None when the run was asked to stop, or the tokens or time
        of the clusters before it reached a run limit, before it started."""
        if not prepared.set_running_or_notify_cancel():
            return
        try:
            if self.ctx.should_stop() or self.ctx.budget.spent() is not None:
                prepared.set_result(None)
                return
            if self._prefetch_sources:  # the guard embeds them while the merge call is out
                self.guard.prefetch_sources(sel, facts)
            # the guard embeds what it can while the facts call is in flight
            result = draft(sel, llm, self.prompts,
                           on_merged=lambda narrative: self._merged(narrative, facts),
                           budget=self.budget)
        except BaseException as exc:  # handed to the run's thread, like a pool future's
            prepared.set_exception(exc)
            return
        given = result.provenance

        def measured(verdict: Future[str | None]) -> None:
            error = verdict.exception()
            if error is not None:
                prepared.set_exception(error)
            else:
                prepared.set_result(_Prepared(result, facts, verdict.result(), given))

        self.guard.submit(result, facts).add_done_callback(measured)

    def _merged(self, narrative: Draft, facts: _Facts) -> None:
        """Worker thread, a cluster's merge call answered: the guard embeds what measuring it
        needs while the facts call is in flight, and its indexed text whenever it is idle."""
        self.guard.prefetch(narrative, facts)
        self.guard.prefetch_indexed(narrative)

    def _failed(self, sel: Selection, llm: LLM, error: str, usage: Usage | None, *,
                set_aside: bool = False,
                back: str = "once a member is edited, joins or leaves, or the prompts or "
                "model change") -> None:
        """A cluster's calls failed: its audit row says so, with the tokens of the replies
        that did arrive (``usage``: the merge's when the facts call failed, refused ones).

        With ``set_aside`` (the server refused the request itself, HTTP 400/413/422: asked
        again it answers the same) the cluster is set aside as the other tiers set a window
        aside: kept in the changes cursor under its members' ids and texts, the prompts and
        the model (:meth:`Selection.aside_key`), it is not sent again until a member is
        edited, joins or leaves, or one of those settings changes, where it was sent, and
        refused, on every run."""
        if set_aside:
            error = set_aside_error(error, [e.id for e in sel.replaced], back=back)
            self.counts["set_aside"] += 1
        self.log.warning("cluster %s of %s skipped: %s", sel.cluster_id, sel.ref, error)
        self.counts["failed"] += 1
        self._name_failed(sel.ref, f"cluster {sel.cluster_id}: {error}")
        conn = self.rt.db()
        with transaction(conn):
            if set_aside:
                cursors.advance(conn, NAME, sel.ref, {sel.cluster_id: self._aside_key(sel)},
                                self.ctx.run_id)
            journal.insert_report(conn, run_id=self.ctx.run_id, ref=sel.ref,
                                  cluster_id=sel.cluster_id, mode=sel.mode,
                                  sources=sel.source_ids, status="failed",
                                  provider=llm.provider, model=llm.model, error=error,
                                  prompt_tokens=usage.prompt_tokens if usage else 0,
                                  completion_tokens=usage.completion_tokens if usage else 0)

    def _aside_key(self, sel: Selection) -> str:
        return sel.aside_key(self.prompts, llm_target(self.rt))

    def _plan(self, prepared: _Prepared) -> journal.Plan | None:
        """The journal plan of a draft that passes every check (the guard's verdicts, archive
        blockers, unchanged sources); None, with its report written, for one that does not."""
        result, too_long = prepared.draft, prepared.too_long
        sel = result.selection
        facts = live_facts(self.rt, sel.ref, [e.id for e in sel.replaced])
        if facts != prepared.facts:  # changed since the worker measured: measure again
            result.coverage = None
            result.provenance = prepared.provenance_given
            too_long = self.guard.remeasure(result, facts)
        assert result.coverage is not None
        plan = journal.new_plan(result, run_id=self.ctx.run_id,
                                fact_ids=[i for fs in facts.values() for i, _ in fs])
        status, error = "ok", None
        blockers = self.rt.store.archive_blockers(sel.ref, [*plan.replaced, *plan.fact_ids])
        if blockers:
            status, error = "skipped", ("cannot archive into " + "; ".join(blockers)
                                        + " (fix the file; see `lint`)")
        elif result.coverage.score < self.floor:
            status, error = "rejected", result.coverage.explain(self.floor)
        elif too_long is not None:
            status, error = "rejected", too_long
        elif (invented := self._invented(result)) is not None:
            status, error = "rejected", invented
        elif (too_big := journal.oversized(self.rt, plan)) is not None:
            status, error = "rejected", too_big
        elif (too_full := journal.overfull(self.rt, plan)) is not None:
            status, error = "rejected", too_full
        else:
            try:
                journal.check_sources(self.rt, plan)
            except journal.StaleSources as exc:
                status, error = "stale", f"{exc}; retried next run"
        if status != "ok":
            self._report_unwritten(plan, status, error)
            return None
        return plan

    def _invented(self, result: Draft) -> str | None:
        """Why the draft states a number, name or date in words that no source states (the
        checks the settings leave on), or None."""
        if self.check_numbers and (invented := unsupported_numbers(result)) is not None:
            return invented
        return unsupported_names(result) if self.check_names else None

    def _commit(self, indexer: Indexer, plans: list[tuple[journal.Plan, _Prepared]]) -> None:
        """Commit checked plans together; a merge interrupted half-way keeps its journal row
        (nothing half-done is lost: the next run recovers it)."""
        # the placing at the run's end is owed before the merges commit: a kill after them
        # leaves the note for the next recovery, which places them as this run would have
        ClusterService(self.rt).owe_placing({p.ref for p, _ in plans})
        outcomes = journal_batch.commit_many(self.rt, indexer, [p for p, _ in plans])
        for outcome, (plan, prepared) in zip(outcomes, plans, strict=True):
            status = outcome.status
            self.counts["merged" if status == "ok" else status] += 1
            if status == journal_batch.INTERRUPTED:  # its row stays for the next recovery
                self._name_failed(plan.ref, f"cluster {plan.cluster_id}: {outcome.error}")
            for problem in outcome.copy_problems:  # the merge's audit row says them too
                self.counts["copy_conflicts"] += 1
                self.ctx.note_failure(str(plan.ref), f"cluster {plan.cluster_id}: {problem}")
            if status != "ok":
                continue
            self._merged_users.add(plan.ref)
            self.counts["archived_episodes"] += len(plan.replaced)
            self.counts["archived_facts"] += len(plan.fact_ids)
            coverage = prepared.draft.coverage
            self.log.info("cluster %s of %s: %s merged %s into %s (coverage %.2f)",
                          plan.cluster_id, plan.ref, plan.mode,
                          counted(len(plan.replaced), "episode"),
                          outcome.merged_id, coverage.score if coverage else 0.0)

    def _report_unwritten(self, plan: journal.Plan, status: str, error: str | None) -> None:
        self.log.warning("cluster %s of %s %s: %s", plan.cluster_id, plan.ref, status, error)
        self.counts[status] += 1
        conn = self.rt.db()
        with transaction(conn):
            journal.insert_report(
                conn, run_id=plan.run_id, ref=plan.ref, cluster_id=plan.cluster_id,
                mode=plan.mode, sources=plan.sources, status=status,
                fact_coverage=plan.coverage, provider=plan.provider, model=plan.model,
                prompt_tokens=plan.prompt_tokens, completion_tokens=plan.completion_tokens,
                duration_ms=plan.llm_ms, error=error)


class FirstRequests:
    """Whether a run's first LLM requests are out, for work that should not compete with them
    for the interpreter lock. Only an LLM that counts its requests (``requests_sent`` and
    ``wait_requests_sent``, as the ``openai`` provider does) can say; with any other, nothing
    waits."""

    def __init__(self, llm: LLM, timeout: float) -> None:
        self._wait = getattr(llm, "wait_requests_sent", None)
        self._before = int(getattr(llm, "requests_sent", 0)) if self._wait is not None else 0
        self._deadline = time.monotonic() + timeout
        self._count = 0
        self._known = threading.Event()

    def expect(self, count: int) -> None:
        """The run has started ``count`` calls at once (one per worker), now or never."""
        self._count = count
        self._known.set()

    def wait(self) -> bool:
        """Block until the expected requests are out, at most until the deadline; whether
        they are."""
        if self._wait is None:
            return True
        if not self._known.wait(max(0.0, self._deadline - time.monotonic())):
            return False
        return bool(self._wait(self._before + self._count,
                               max(0.0, self._deadline - time.monotonic())))


def users_with_clusters(runtime: Runtime) -> Iterator[UserRef]:
    """Every user of every app/project tenant that has clusters, in a stable order."""
    yield from reads.cluster_owners(runtime.db())


def live_facts(runtime: Runtime, ref: UserRef,
               parents: list[str]) -> dict[str, list[tuple[str, str]]]:
    """``{episode id: [(fact id, fact text), ...]}`` of the live atomic facts of ``parents``,
    from the index (just reconciled with the Markdown by the run's scan)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for fact_id, parent, text in reads.live_facts_of(runtime.db(), ref, parents):
        out.setdefault(parent, []).append((fact_id, text))
    return out


__all__ = ["NAME", "FirstRequests", "ReflectEpisodes", "ReflectionRun", "live_facts",
           "users_with_clusters"]
