"""What the three belief tiers share around their pure rules: reading a user's beliefs from the
Markdown, the per-owner run loop with its changes cursor, and the idempotent write.

A tier run, per owner: read the state → compute the window (:func:`beliefs.window`) → is it
due? → have these outputs already been written for this exact window (a crash after the write,
before the cursor moved)? → else one LLM task → write all outputs in one atomic append, tagged
with the window's key (``derivation``) → sync the index → in one transaction, advance the cursor
by the window and record the derivation. Nothing before the last step is visible to the cursor,
so a crash anywhere re-reads the same window, finds its outputs by their key and writes nothing
twice.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from everos_reflect.engine.limits import Budget
from everos_reflect.engine.registry import (
    RunContext,
    SettingSpec,
    Strategy,
    count_between,
    duration_up_to,
    positive_up_to,
    run_limit,
)
from everos_reflect.engine.triggers import CountTrigger
from everos_reflect.errors import EverosError, ProvenanceBusy, ProviderUnavailable, describe
from everos_reflect.index import cursors
from everos_reflect.index.db import transaction
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.problem_words import counted
from everos_reflect.strategies import beliefs
from everos_reflect.strategies.aside import SentWith, prompt_budget, tier_prompts

if TYPE_CHECKING:
    import sqlite3

    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

#: The metadata key naming the input window a derived record was written from.
DERIVATION_KEY = "derivation"
#: How deep the belief loop may climb (SPEC §10 ``max_depth``, per strategy). Episodes are 0,
#: insights 1, convictions 2, edges 3, reconciliations 4, the convictions that read them 5 …
#: the cap is what ends the loop.
DEFAULT_MAX_DEPTH = 8
#: The most a tier's ``max_depth`` takes. A turn of the loop (conviction, edge,
#: reconciliation) adds three levels, so 100 lets it turn thirty times; ``10**12`` was taken,
#: a cap that no longer ended the loop.
MAX_TIER_DEPTH = 100
NEEDS_LLM = "needs an LLM"


def tier_settings(*, cooldown: float) -> tuple[SettingSpec, ...]:
    """Keys every belief tier takes (SPEC §10): cooldown, run limits and the depth cap."""
    return (
        SettingSpec("cooldown_seconds", float, cooldown,
                    "Least time between two data-triggered runs.",
                    duration_up_to(31_536_000, "a year")),
        SettingSpec("max_llm_calls", int, 20,
                    "LLM calls per run (one per owner); owners past it wait for the next run.",
                    run_limit),
        SettingSpec("max_tokens", int, 200_000,
                    "Prompt + completion tokens per run; the run stops once past it.",
                    run_limit),
        SettingSpec("max_wall_seconds", float, 600.0,
                    "Wall time per run; the run stops between owners once past it.",
                    positive_up_to(31_536_000, "a year")),
        SettingSpec("max_records", int, 50,
                    "Records one call shows and one window holds (the window oldest first); "
                    "what is past it is not consumed but waits for the next run.",
                    records_per_call),
        SettingSpec("max_depth", int, DEFAULT_MAX_DEPTH,
                    "Deepest record this tier may write (1 + the deepest record it cites).",
                    count_between(2, MAX_TIER_DEPTH, "levels of citation")),
        SettingSpec("prompts", dict, {}, "Prompt overrides by task name.", prompts_problem),
    )


def records_per_call(value: int) -> str | None:
    """A tier's ``max_records`` is what one call shows: at least 2, at most
    :data:`~everos_reflect.llm.tasks.MAX_RECORDS_PER_CALL`. The records of a call share
    200,000 characters, so past that bound a long record would be shown as a fragment (an
    unbounded value made the prompt itself unbounded before the share could shrink)."""
    from everos_reflect.llm.tasks import MAX_RECORDS_PER_CALL, MAX_RECORDS_PROMPT_CHARS

    if 2 <= value <= MAX_RECORDS_PER_CALL:
        return None
    return (f"must be between 2 and {MAX_RECORDS_PER_CALL:,} (the records one call shows; "
            f"they share {MAX_RECORDS_PROMPT_CHARS:,} characters)")


def prompts_problem(value: Mapping[str, Any]) -> str | None:
    """Why a tier's ``prompts`` table cannot be used (unknown name, not a string, a template
    without ``$records`` ...), checked when ``ome.toml`` loads. Unchecked, a bad override was
    taken as a good configuration: every run of the tier then failed on it (reflect_insights
    consuming its window each time), naming another strategy's section."""
    from everos_reflect.errors import ConfigError
    from everos_reflect.llm.prompts import Prompts

    try:
        Prompts.from_settings({"prompts": value}, section=None)
    except ConfigError as exc:
        return "; ".join(f"{where}: {reason}" for _, where, reason in exc.problems)
    return None


# -- reading ---------------------------------------------------------------------------------


@dataclass
class BeliefState:
    """One owner's insights, convictions and self-contradiction edges, as Markdown has them."""

    insights: list[Entry]
    convictions: list[Entry]
    relations: list[Entry]

    @classmethod
    def load(cls, runtime: Runtime, ref: UserRef) -> BeliefState:
        store = runtime.store
        return cls(store.entries(ref, Kind.INSIGHT), store.entries(ref, Kind.CONVICTION),
                   store.entries(ref, Kind.RELATION))

    def by_id(self) -> dict[str, Entry]:
        return {e.id: e for e in (*self.insights, *self.convictions, *self.relations)}

    def worldview(self) -> beliefs.Worldview:
        return beliefs.current_worldview(beliefs.Conviction.of(e) for e in self.convictions)

    def edges(self) -> list[beliefs.Edge]:
        return [beliefs.Edge.of(e) for e in self.relations
                if e.meta.get("relation_type") == beliefs.SELF_CONTRADICTION]

    def successors(self) -> dict[str, str]:
        return {e.id: e.deprecated_by for e in self.convictions if e.deprecated_by}

    def written_by(self, key: str, kind: Kind) -> list[Entry]:
        """Records of ``kind`` already written for the window ``key`` (after a crash)."""
        pool = {Kind.INSIGHT: self.insights, Kind.CONVICTION: self.convictions,
                Kind.RELATION: self.relations}[kind]
        return [e for e in pool if e.meta.get(DERIVATION_KEY) == key]


def owners(runtime: Runtime) -> Iterator[UserRef]:
    """Every user with a folder under the root."""
    yield from runtime.store.iter_users()


# -- writing ---------------------------------------------------------------------------------


def derived_meta(*, evidence: Sequence[str], depth: int, key: str,
                 extra: Mapping[str, Any] | None = None,
                 now: datetime | None = None,
                 seen: Mapping[str, Entry] | None = None) -> dict[str, Any]:
    """SPEC §10 metadata every derived record carries, plus the window key.

    With ``seen`` (id → the entry as the model was shown it) the record also keeps
    ``evidence_hash``, the text hash of each cited record then: provenance invalidation compares
    it with the current text to tell an edited citation from an unchanged one.

    Without ``now`` the ``timestamp`` is left for the store to stamp when it appends, from
    the same clock read that names the record's daily log: read here as well, a record
    written at midnight said 23:59:59 in the next day's log."""
    meta: dict[str, Any] = {"timestamp": now}  # None: the store stamps it (first key still)
    meta.update(extra or {})
    meta.update({"evidence": list(evidence), "depth": depth, "status": beliefs.ACTIVE,
                 DERIVATION_KEY: key})
    if seen is not None:
        meta["evidence_hash"] = {i: seen[i].text_hash for i in evidence if i in seen}
    return meta


def repair(runtime: Runtime, ref: UserRef, state: BeliefState) -> set[Path]:
    """Restore the worldview's invariants a crash or a hand edit may have broken: one live
    conviction per key (older live versions are archived by the newest) and no standing edge
    citing a conviction that is no longer live (resolved, with the reason). Idempotent."""
    store, touched = runtime.store, set()
    view = state.worldview()
    if view.repairs:
        store.deprecate(ref, view.repairs)
        touched |= {store.path_for_id(ref, old) for old in view.repairs}
    live = {c.id for c in view.current.values()}
    successors = {**state.successors(), **view.repairs}
    now = datetime.now(UTC)
    superseded = beliefs.superseded_edges(state.edges(), live, successors)
    if not superseded:
        return touched
    with ExitStack() as locks:
        # the edges read again under their logs' locks, which `resolve` holds too: one a
        # person resolved since ``state`` was read keeps the person's note (it was written
        # over with "automatic: …")
        for path in sorted({store.path_for_id(ref, edge_id) for edge_id in superseded}):
            locks.enter_context(store.lock(path))
        now_active = {edge_id for edge_id, entry in store.get_many(ref, superseded).items()
                      if beliefs.Edge.of(entry).standing}
        resolved = {edge_id: {"status": beliefs.RESOLVED, "resolved_at": now,
                              "resolution": f"automatic: {reason}"}
                    for edge_id, reason in superseded.items() if edge_id in now_active}
        # one write per log: edge by edge, n edges of one day's log were n copies of that log
        store.update_metas(ref, resolved)
    touched |= {store.path_for_id(ref, edge_id) for edge_id in resolved}
    return touched


def unexpected(exc: Exception) -> str:
    """An unexpected exception as an audit row and the run record say it: in its cause's
    words, as every run record does (:func:`errors.describe`)."""
    return describe(exc)


def owner_failed(ctx: RunContext, strategy: str, ref: UserRef, exc: Exception,
                 counts: MutableMapping[str, int], *, inputs: Sequence[str] = ()) -> None:
    """One owner's unexpected error (an OSError writing its log, a hand-edited record that
    trips a bug), caught by a strategy's loop over owners so that it fails that owner alone:
    counted ``failed``, named in the run record (:meth:`RunContext.note_failure`), logged
    with the traceback, and recorded failed in ``derivation_report`` (``inputs``: what the
    owner was working on) when the database still takes it. The caller re-raises instead
    when the root is gone (``runtime.root_gone()``): not the owner's fault."""
    from everos_reflect.index.audit import Derivation, record_derivation

    error = unexpected(exc)
    # a domain error (a user folder gone, a log too large) says it all: no traceback
    ctx.log.error("%s: %s failed: %s", strategy, ref, error,
                  exc_info=None if isinstance(exc, EverosError) else exc)
    counts["failed"] = counts.get("failed", 0) + 1
    ctx.note_failure(str(ref), error)
    try:
        record_derivation(ctx.runtime.db(), Derivation(
            strategy=strategy, ref=ref, status="failed", run_id=ctx.run_id,
            inputs=list(inputs), error=error))
    except Exception:
        log.exception("%s: the failure of %s could not be recorded", strategy, ref)


def llm_provider(runtime: Runtime) -> str:
    """The provider in use — an ``openai`` setting without a server falls back to the
    extractive one — read without building a client when none was built yet."""
    llm = runtime.__dict__.get("llm")
    if llm is not None:
        return str(getattr(llm, "provider", ""))
    cfg = runtime.settings.llm
    usable = cfg.provider == "openai" and (cfg.base_url or cfg.api_key)
    return "openai" if usable else "extractive"


def sync(runtime: Runtime, paths: Iterable[Path]) -> None:
    """Bring the index up to date with the files a tier wrote (search and the next tier)."""
    from everos_reflect.index.sync import Indexer

    paths = sorted(set(paths))
    if paths:
        Indexer(runtime, notify_clusters=False).sync_paths(paths)


def note_clipped(ctx: RunContext, what: str, request: Any) -> None:
    """Log the records and values of ``request`` (a ``TaskRequest``) cut to fit the prompt,
    by id and name, so a person can find what the model saw only part of."""
    from everos_reflect.llm.tasks import MAX_VALUE_PROMPT_CHARS

    if request.clipped:
        ctx.log.warning("%s: %s %s shown to the model cut to fit the prompt", what,
                        "record" if len(request.clipped) == 1 else "records",
                        ", ".join(request.clipped))
    if request.clipped_values:
        ctx.log.warning("%s: %s shown to the model cut to %d characters", what,
                        ", ".join(f"${k}" for k in request.clipped_values),
                        MAX_VALUE_PROMPT_CHARS)


# -- the run loop ----------------------------------------------------------------------------


@dataclass
class Derived:
    """What :meth:`BeliefTier.derive` did: the ids written and who wrote them at what cost."""

    outputs: list[str] = field(default_factory=list)
    provider: str | None = None
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    refused: int = 0  # proposals the tier's rules turned down (logged with the reason)
    clipped: int = 0  # records shown to the model cut to the tier's cap (logged with ids)
    #: Set when the tier had nothing honest to write without an LLM (the reason): the window
    #: is recorded ``skipped`` and the run counts it as ``needs_llm``.
    needs_llm: str | None = None
    #: Parts of the window that failed while the rest was written (``"task type 'x': why"``):
    #: the derivation is ``partial``, each part counts as ``failed``, and :attr:`pending`
    #: says which records stay in the window for the next run.
    failures: list[str] = field(default_factory=list)
    #: Window ids not consumed by this derivation (a failed part's): they wait for a run.
    pending: set[str] = field(default_factory=set)
    #: Records the call would have shown beside the window but ``max_records`` left out
    #: (counted ``unshown_records``).
    unshown: int = 0
    #: Records a call left out to fit ``[llm] max_prompt_tokens`` (counted
    #: ``left_out_over_budget``): those of the window stay pending for the next run.
    left_out: set[str] = field(default_factory=set)
    #: Records written citing only the most recent ``beliefs.MAX_CITATIONS`` of what the
    #: reply cited (``beliefs.citations_kept`` notes, counted ``citations_cut``): the
    #: derivation row's ``error`` says so.
    cut_citations: list[str] = field(default_factory=list)
    #: Why proposals were refused (the first :data:`MAX_NAMED_REFUSALS` of each call,
    #: :meth:`take`): the derivation row's ``error`` names them, where only the daemon's log
    #: said why an ``ok`` row with no outputs wrote nothing.
    refusals: list[str] = field(default_factory=list)

    def take(self, refusals: Refusals) -> None:
        """Count the proposals ``refusals`` refused, and keep the reasons it named."""
        self.refused += refusals.close()
        self.refusals += refusals.reasons

    def refusal_note(self) -> str:
        """The refusals as the row's ``error`` says them: the first
        :data:`MAX_NAMED_REFUSALS` reasons, then how many more (a reply may hold hundreds of
        thousands)."""
        named = self.refusals[:MAX_NAMED_REFUSALS]
        more = self.refused - len(named)
        return "; ".join([*named, *([f"{more:,} more refused"] if more > 0 else [])])


#: Refusals of one call logged one by one; past it they are counted in one line.
MAX_LOGGED_REFUSALS = 10
#: Refusals named in a derivation row's ``error``; past it they are counted.
MAX_NAMED_REFUSALS = 5


@dataclass
class Refusals:
    """The proposals one call's reply had refused, logged (the first
    :data:`MAX_LOGGED_REFUSALS`, then one line with the count) and counted. A lying model's
    reply (up to 16 MB) can hold hundreds of thousands of refused items: logged one line each,
    one run wrote tens of megabytes of log."""

    log: logging.Logger
    what: str
    level: int = logging.INFO
    count: int = 0
    #: The first :data:`MAX_NAMED_REFUSALS` reasons, for the derivation row.
    reasons: list[str] = field(default_factory=list)

    def add(self, reason: str) -> None:
        self.count += 1
        if len(self.reasons) < MAX_NAMED_REFUSALS:
            self.reasons.append(reason)
        if self.count <= MAX_LOGGED_REFUSALS:
            self.log.log(self.level, "%s: %s", self.what, reason)

    def close(self) -> int:
        """Log how many were not logged one by one; the number refused."""
        if self.count > MAX_LOGGED_REFUSALS:
            self.log.log(self.level, "%s: %s refused (the first %d are logged above)",
                         self.what, counted(self.count - MAX_LOGGED_REFUSALS, "more proposal"),
                         MAX_LOGGED_REFUSALS)
        return self.count


#: What brings a set-aside record back, as the audit says it.
BACK = "once edited, or the prompts or model change"


def set_aside_error(problem: str, ids: Iterable[str], *, back: str = BACK) -> str:
    """The failure text of records set aside: the server's refusal, then which records will
    not be sent again and what brings them back (the same words in every tier's audit). At
    most :data:`SET_ASIDE_NAMED` ids are named (an insights window holds up to 1,000); the
    row's ``inputs`` list them all."""
    ids = list(ids)
    named = ", ".join(ids[:SET_ASIDE_NAMED])
    if len(ids) > SET_ASIDE_NAMED:
        named += f" and {len(ids) - SET_ASIDE_NAMED} more (the row's inputs)"
    return f"{problem}; set aside: {named} (sent again {back})"


#: The most record ids a set-aside failure names in its error text.
SET_ASIDE_NAMED = 10


class SetAside(ProviderUnavailable):
    """The server refused part of a window for good (:attr:`ProviderUnavailable.permanent`):
    ``items`` (id → text hash) are set aside with the failure recorded, so the same records are
    not sent again and again while the rest of the window waits behind them; an edit changes
    a record's hash and brings it back, as a change of the prompts or model does
    (:meth:`BeliefTier.sent_with`). The rest of the window stays pending."""

    def __init__(self, message: str, items: Mapping[str, str], usage: Any = None) -> None:
        super().__init__(message)
        self.items = dict(items)
        self.usage = usage


@dataclass
class Work:
    """One owner's due unit of work: its window (id → text hash) and its key."""

    ref: UserRef
    state: BeliefState
    items: dict[str, str]
    key: str
    #: LLM calls this owner's pending records need beyond the window (which was cut to what
    #: ``max_llm_calls`` allows): the run stops after it, saying the limit was reached.
    deferred_calls: int = 0
    #: Unconsumed records past the window's ``max_records`` cut: they wait for the next run
    #: (counted ``deferred_records``).
    deferred_records: int = 0
    #: The cursor rows a success commits when they are not the window itself (None: the
    #: window): ``detect_contradictions`` keeps a changed conviction until every pair it is
    #: in was shown, and notes each pair shown. Noted in the commit intent, so a crash
    #: settles to the same rows.
    commit: dict[str, str] | None = None
    #: What the tier planned for this window (``detect_contradictions``: which convictions
    #: one call shows), when it is decided with the window.
    plan: Any = None
    #: The owner's cursor rows as :meth:`BeliefTier.owner_work` read them, once per poll:
    #: a subclass planning on top of the window (the detector's pairs) reads them here.
    done: Collection[beliefs.Seen] = ()


#: The owners below the threshold a run's :meth:`BeliefTier.idle_reason` names (the others
#: counted).
IDLE_OWNERS_NAMED = 3


class BeliefTier(Strategy):
    """A belief tier: per owner, window → due? → one LLM task → idempotent write → cursor.

    A window whose call fails stays pending for the next run, unless the server refused the
    request itself (:attr:`ProviderUnavailable.permanent`: HTTP 400, 413, 422): then the
    window is set aside with the failure recorded (``set aside: <ids>``, counted
    ``set_aside``), rather than sent again, and refused again, by every run. It is kept in the
    cursor under a key of each record's text hash *and* of the prompts and model its calls are
    sent with (:meth:`sent_with`): an edit of a record, or of a prompt the tier sends, or
    another ``[llm]`` provider, model or ``base_url``, brings it back.

    Subclasses give the window's candidates, the due rule, and how one window becomes records
    (:meth:`derive`, which calls the LLM and writes, returning the ids it wrote).
    """

    output_kind: Kind = Kind.CONVICTION
    task: str = ""
    #: Every task a window's calls may use (default: :attr:`task`): their templates are part
    #: of what a set-aside record is kept under (:meth:`sent_with`).
    sent_tasks: tuple[str, ...] = ()
    #: The scheduler's data poll fires the tier once one owner is due (:meth:`observe` applies
    #: the tier's own threshold and cooldown per owner).
    data_trigger = CountTrigger(n=1)
    #: A unit is one owner's window: a run whose every owner failed is ``failed``.
    unit_counts = ("owners", "failed")
    #: Whether window records a call left out to fit ``[llm] max_prompt_tokens`` stay
    #: pending (a tier whose calls show other records than its window says no).
    defer_left_out = True
    #: What the tier's window reads, as :meth:`idle_reason` names it ("no new insights").
    reads: str = "records"

    # -- what a subclass says ---------------------------------------------------------------

    def candidates(self, state: BeliefState, settings: Mapping[str, Any]) -> dict[str, str]:
        """The records this tier reads as changes: id → text hash."""
        raise NotImplementedError

    def due(self, state: BeliefState, window: list[str], settings: Mapping[str, Any]) -> bool:
        raise NotImplementedError

    def derive(self, ctx: RunContext, work: Work, budget: Budget) -> Derived:
        """Call the LLM for ``work`` and write its records."""
        raise NotImplementedError

    def calls_per_unit(self, settings: Mapping[str, Any]) -> int:
        """The most LLM calls one owner's window makes (the run reserves them up front)."""
        return 1

    def calls_for(self, work: Work, settings: Mapping[str, Any]) -> int:
        """The LLM calls ``work`` will make (the run reserves them before starting it)."""
        return self.calls_per_unit(settings)

    def call(self, ctx: RunContext, budget: Budget, records: Sequence[Any],
             values: Mapping[str, str], derived: Derived, task: str | None = None, *,
             min_records: int = 1, keep_last: bool = False) -> Any:
        """One task call (``task``, else the tier's) through the configured provider, counted
        against the budget; records cut to fit the prompt are counted in ``derived``.

        ``records`` come most important first (last with ``keep_last``): those past what the
        prompt fits in ``[llm] max_prompt_tokens`` are left out (:func:`fit_request`),
        logged, counted in ``derived.left_out``; a window record among them stays pending.
        Only when not even ``min_records`` fit is the request refused unsent."""
        from everos_reflect.llm.tasks import fit_request

        what = f"{self.name} ({task or self.task})"
        request, left_out = fit_request(
            task or self.task, records, values, budget=prompt_budget(ctx.runtime),
            prompts=tier_prompts(ctx.settings), min_records=min_records, keep_last=keep_last)
        if left_out:
            ctx.log.warning("%s: %s left out to fit llm.max_prompt_tokens (%s): %s",
                            what, counted(len(left_out), "record"),
                            f"{prompt_budget(ctx.runtime):,}",
                            ", ".join(left_out))
            derived.left_out |= set(left_out)
            budget.charge_left_out(len(left_out))  # counted even if the window fails
        note_clipped(ctx, what, request)
        derived.clipped += len(request.clipped)
        budget.charge_clipped(len(request.clipped))  # counted even if the window fails
        result = ctx.llm.run_task(task or self.task, request)  # charged to the run's budget
        derived.provider, derived.model = result.provider, result.model
        derived.prompt_tokens += result.usage.prompt_tokens
        derived.completion_tokens += result.usage.completion_tokens
        return result.value

    # -- shared ------------------------------------------------------------------------------

    def sent_with(self, runtime: Runtime, settings: Mapping[str, Any]) -> SentWith:
        """What this tier's settings put into its calls (the templates of its tasks, the
        model): a record the server refused for good is set aside under its text hash and
        this (:meth:`SentWith.key`), so a changed prompt or model sends it again once."""
        return SentWith.tasks(runtime, settings, self.sent_tasks or (self.task,))

    def pending(self, runtime: Runtime, ref: UserRef, settings: Mapping[str, Any],
                state: BeliefState | None = None, *,
                done: Collection[beliefs.Seen] | None = None,
                ) -> tuple[BeliefState, dict[str, str]]:
        """The owner's state and its window (id → text hash), at most ``max_records``: what
        it has not consumed, nor set aside under the prompts and model it would send now.
        ``done``: the owner's cursor rows when the caller read them already (an override
        takes it too, so :meth:`owner_work` reads them once per poll), else read here."""
        state = state or BeliefState.load(runtime, ref)
        candidates, ids = self.unconsumed(runtime, ref, settings, state, done=done)
        ids = ids[: int(settings.get("max_records", 50))]
        return state, {i: candidates[i] for i in ids}

    def unconsumed(self, runtime: Runtime, ref: UserRef, settings: Mapping[str, Any],
                   state: BeliefState, *, done: Collection[beliefs.Seen] | None = None,
                   ) -> tuple[dict[str, str], list[str]]:
        """``ref``'s candidates (id → text hash) and, sorted, the ids neither consumed nor set
        aside under the prompts and model it would send now: the window before its cut.
        ``done``: the cursor rows already read (:meth:`pending`), else read here."""
        candidates = self.candidates(state, settings)
        if done is None:
            done = cursors.consumed(runtime.db(), self.name, ref)
        aside = self.sent_with(runtime, settings).key
        return candidates, beliefs.window(candidates, done, aside)

    def due_owners(self, runtime: Runtime, settings: Mapping[str, Any], *,
                   force: bool = False, fix: bool = False) -> Iterator[Work]:
        """Owners whose window is due (any non-empty window with ``force``), in the order of
        :func:`owners` (:meth:`owner_work` for each)."""
        for ref in owners(runtime):
            work = self.owner_work(runtime, ref, settings, force=force, fix=fix)
            if work is not None:
                yield work

    def owner_work(self, runtime: Runtime, ref: UserRef, settings: Mapping[str, Any], *,
                   force: bool = False, fix: bool = False) -> Work | None:
        """``ref``'s window when it is due (any non-empty window with ``force``), else None.
        With ``fix`` the worldview's invariants are repaired first (:func:`repair`), so the
        window is read from a consistent state; ``observe`` reads without writing."""
        state = BeliefState.load(runtime, ref)
        if fix:
            touched = repair(runtime, ref, state)
            if touched:
                sync(runtime, touched)
                state = BeliefState.load(runtime, ref)
        # read once per poll and passed to every hook that needs it (the window, the
        # backlog, a subclass's plan); each of them read the rows again, up to four per owner
        done = cursors.consumed(runtime.db(), self.name, ref)
        state, items = self.pending(runtime, ref, settings, state, done=done)
        if not items:
            return None
        if force or self.due(state, list(items), settings):
            left = self.backlog(runtime, ref, settings, state, done=done)
            return Work(ref, state, items, beliefs.window_key(self.name, str(ref), items),
                        deferred_records=left - len(items), done=done)
        return None

    def backlog(self, runtime: Runtime, ref: UserRef, settings: Mapping[str, Any],
                state: BeliefState, *, done: Collection[beliefs.Seen] | None = None) -> int:
        """How many of ``ref``'s candidates are not consumed yet (the window before any
        cut): the ones past the window wait for a later run, and the run says how many.
        ``done``: the cursor rows already read, else read here."""
        return len(self.unconsumed(runtime, ref, settings, state, done=done)[1])

    def observe(self, runtime: Runtime, since: datetime | None,
                settings: Mapping[str, Any] | None = None) -> float:
        """The number of owners due now (the scheduler's data trigger fires at 1), 0 while the
        cooldown since the last run lasts."""
        from everos_reflect.engine.engine import Engine

        if settings is None:
            settings = Engine(runtime, recover=False).settings_for(self.name)
        cooldown = timedelta(seconds=float(settings.get("cooldown_seconds", 0.0)))
        if not beliefs.cooldown_over(since, datetime.now(UTC), cooldown):
            return 0.0
        if self.needs_llm(runtime):
            return 0.0
        due = 0
        for ref in owners(runtime):
            try:
                due += self.owner_work(runtime, ref, settings) is not None
            except Exception:  # one owner's broken records must not hide the others' news;
                # the run that follows reports the owner (the poll only logs it)
                log.warning("%s: cannot read %s to see whether it is due", self.name, ref,
                            exc_info=True)
        return float(due)

    def unavailable(self, runtime: Runtime) -> str | None:
        return self.needs_llm(runtime)

    def idle_reason(self, runtime: Runtime, settings: Mapping[str, Any],
                    counts: Mapping[str, int]) -> str | None:
        """Why a run wrote nothing (:meth:`Strategy.idle_reason`): it needs an LLM, no
        owner has new :attr:`reads` since the last run, or the new ones are below the
        threshold (each such owner's :meth:`progress`, the first few named). A manual run
        waits out no cooldown, so that is never the reason here."""
        if counts.get("needs_llm"):
            return self.needs_llm(runtime) or "needs an LLM (the run's log says for whom)"
        below = []
        for ref in owners(runtime):
            work = self.owner_work(runtime, ref, settings, force=True)
            if work is not None:
                below.append(f"{ref}: {self.progress(work.state, list(work.items), settings)}")
        if not below:
            return f"no new {self.reads} since the last run"
        more = f"; and {len(below) - IDLE_OWNERS_NAMED} more" \
            if len(below) > IDLE_OWNERS_NAMED else ""
        return "below the threshold: " + "; ".join(below[:IDLE_OWNERS_NAMED]) + more

    def progress(self, state: BeliefState, window: list[str],
                 settings: Mapping[str, Any]) -> str:
        """How far an owner's ``window`` is from starting a run ("2 new insights of the
        threshold 3"), for :meth:`idle_reason`."""
        threshold = settings.get("threshold")
        of = f" of the threshold {threshold}" if threshold is not None else ""
        return f"{len(window)} new {self.reads}{of}"

    def load_state(self, runtime: Runtime, ref: UserRef) -> Any:
        """The owner's state as this tier reads it (its ``written_by`` finds outputs by key)."""
        return BeliefState.load(runtime, ref)

    def recover(self, runtime: Runtime) -> dict[str, int]:
        """Settle every commit of this tier a crash interrupted (the engine calls this under
        the tier's lock). The intent row names the exact window: outputs tagged with its key
        were written → index them, move the cursor by that window and record the derivation;
        none were → the window stays pending for the next run. Idempotent.

        An owner whose commit cannot be settled (reading their records or indexing the output
        raises) keeps the intent and is left to the run, which fails that owner alone (named,
        counted) or finishes the commit's bookkeeping: raised from here, one owner's broken
        records failed the whole run before any owner was looked at, run after run."""
        conn, counts = runtime.db(), Counter[str]()
        for ref, key, items in cursors.intents(conn, self.name):
            try:
                settled = self._settle(runtime, conn, ref, key, items)
            except Exception:
                if runtime.root_gone():
                    raise
                log.exception("%s: %s: the interrupted commit %s could not be settled; "
                              "left to the run", self.name, ref, key)
                continue
            counts["recovered" if settled else "withdrawn"] += 1
        return dict(counts)

    def _settle(self, runtime: Runtime, conn: sqlite3.Connection, ref: UserRef, key: str,
                items: dict[str, str]) -> bool:
        """Settle one interrupted commit (:meth:`recover`); whether its outputs were written."""
        from everos_reflect.index.audit import Derivation, insert_derivation

        holder, state = ref, self.load_state(runtime, ref)
        written = state.written_by(key, self.output_kind)
        if not written:  # its folder renamed or moved by hand before the restart?
            holder, state, written = self._moved_commit(runtime, ref, key, state)
        if written:
            sync(runtime, {runtime.store.path_for_id(holder, e.id) for e in written})
            items = self.written_for(state, items, written)
        with transaction(conn):
            if written:
                cursors.advance(conn, self.name, holder, items, None)
                self.forget_stale(conn, holder, state)
                insert_derivation(conn, Derivation(
                    strategy=self.name, ref=holder, status="ok",
                    inputs=self.entry_ids(items), outputs=[e.id for e in written],
                    error="recovered: the commit was interrupted after its write"))
            cursors.end_intent(conn, self.name, ref, key)
        log.info("%s: %s: interrupted commit %s %s", self.name, ref, key,
                 ("recovered" + (f" in {holder}'s folder, which holds it now"
                                 if holder != ref else ""))
                 if written else "withdrawn (nothing was written)")
        return bool(written)

    def _moved_commit(self, runtime: Runtime, ref: UserRef, key: str,
                      state: Any) -> tuple[UserRef, Any, list[Entry]]:
        """Where an interrupted commit of ``ref`` that ``ref``'s logs show nothing of went:
        the one other user whose logs hold outputs tagged with its window ``key`` (its folder
        renamed or moved by hand before the restart), with that user's state and those
        outputs; else ``ref``, ``state`` and nothing (several holders, a copied folder: not
        guessed). Settled under the old name, the commit was withdrawn and its outputs stood
        in the renamed folder with no audit row."""
        found = []
        for other in runtime.store.iter_users():
            if other == ref:
                continue
            theirs = self.load_state(runtime, other)
            written = theirs.written_by(key, self.output_kind)
            if written:
                found.append((other, theirs, list(written)))
        return found[0] if len(found) == 1 else (ref, state, [])

    def written_for(self, state: Any, items: Mapping[str, str],
                    written: Sequence[Entry]) -> dict[str, str]:
        """The rows of an interrupted commit's ``items`` that its ``written`` outputs (found
        under the window's key) account for, which the cursor then consumes: all of them, as
        a tier writes a window's outputs in one append."""
        return dict(items)

    def forget_stale(self, conn: sqlite3.Connection, ref: UserRef, state: Any) -> None:
        """Drop cursor rows of ``ref`` that can never match again, given ``state`` (the
        owner's records as this commit read them); called inside the transaction that
        writes the cursor. Nothing here: a tier's entry rows stay (an archived record
        restored by ``undo`` is then not new again)."""

    def entry_ids(self, rows: Mapping[str, str]) -> list[str]:
        """The entry ids among cursor ``rows`` (a :attr:`Work.commit` may hold other
        bookkeeping): what an audit row names as ``inputs``."""
        return list(rows)

    @staticmethod
    def needs_llm(runtime: Runtime) -> str | None:
        """Why this tier cannot run with the configured provider (``None``: it can).

        The provider in use decides — an ``openai`` setting without a server falls back to
        the extractive one — read without building a client when none was built yet."""
        if llm_provider(runtime) == "extractive":
            return (f"{NEEDS_LLM}: convictions, contradictions and reconciliations are written "
                    "by a language model; the extractive provider writes none (set [llm] "
                    "provider = \"openai\" with a base_url/api_key)")
        return None

    def run(self, ctx: RunContext) -> dict[str, int]:
        rt, counts = ctx.runtime, Counter[str]()
        reason = self.needs_llm(rt)
        if reason:
            ctx.log.warning("%s: %s", self.name, reason)
            counts["needs_llm"] += 1
            return dict(counts)
        budget = ctx.budget  # the engine's run limits (engine/limits.py)
        for ref in owners(rt):
            if ctx.should_stop():
                break
            # one owner's unexpected error (an OSError writing its log, a hand-edited record
            # that trips a bug) fails that owner alone, as a failed LLM call does: the owners
            # after it are still run
            try:
                work = self.owner_work(rt, ref, ctx.settings, force=ctx.force, fix=True)
                if work is None:
                    continue
                # an owner is started only if max_llm_calls leaves room for all of its calls
                metered = ctx.llm.metered
                ahead = self.calls_for(work, ctx.settings) if metered else 0
                hit = ctx.limit_reached(calls_ahead=ahead)
                if hit:
                    ctx.log.info("%s: stopping early: %s", self.name, hit)
                    counts["limit_reached"] += 1
                    break
                self._one(ctx, work, budget, counts)
                budget.charge_records(len(work.items))
                if work.deferred_records > 0:  # past the window: not consumed, they wait
                    ctx.log.info("%s: %s: %s past the window %s for the next run",
                                 self.name, ref, counted(work.deferred_records, "record"),
                                 "waits" if work.deferred_records == 1 else "wait")
                    counts["deferred_records"] += work.deferred_records
            except Exception as exc:
                if rt.root_gone() or isinstance(exc, ProvenanceBusy):
                    raise  # not this owner's fault: the engine says what happened (busy:
                    # every owner after it would wait as long, each)
                self._owner_failed(ctx, ref, exc, counts)
                continue
            if metered and work.deferred_calls:  # the rest of this owner waits for a run
                hit = ctx.limit_reached(calls_ahead=work.deferred_calls)
                if hit:
                    ctx.log.info("%s: stopping early: %s", self.name, hit)
                    counts["limit_reached"] += 1
                    break
        return dict(counts)

    def _owner_failed(self, ctx: RunContext, ref: UserRef, exc: Exception,
                      counts: Counter[str]) -> None:
        """An owner whose reading or bookkeeping raised (:meth:`_one` records the failures
        of its own work): :func:`owner_failed`."""
        owner_failed(ctx, self.name, ref, exc, counts)

    def _one(self, ctx: RunContext, work: Work, budget: Budget, counts: Counter[str]) -> None:
        started = time.monotonic()
        already = work.state.written_by(work.key, self.output_kind)
        derived, status, error = Derived([e.id for e in already]), "ok", None
        set_aside: dict[str, str] = {}
        keep_intent = False
        tokens_before = budget.token_counts()  # owners run one at a time
        clipped_before, left_out_before = budget.clipped, budget.left_out
        conn = ctx.runtime.db()
        # counted once the derivation is recorded: an owner whose bookkeeping then fails is
        # counted failed (by the run loop), not both done and failed
        mine = Counter[str]()
        try:
            if already:  # written before a crash: finish the bookkeeping only
                mine["recovered"] += 1
                done = self.written_for(work.state, work.items, already)
                derived.pending = set(work.items) - set(done)  # wait for the next run
            else:
                # noted before any Markdown write, so recovery knows this exact window
                cursors.begin_intent(conn, self.name, work.ref, work.key,
                                     work.items if work.commit is None else work.commit,
                                     ctx.run_id)
                derived = self.derive(ctx, work, budget)
                if self.defer_left_out:  # not shown, so not consumed: the next run shows it
                    derived.pending |= derived.left_out & work.items.keys()
        except ProviderUnavailable as exc:
            status, error = "failed", str(exc)
            if isinstance(exc, SetAside):  # the tier set part of the window aside itself
                set_aside = exc.items
            elif exc.permanent:  # the server refused this window for good: asking again
                set_aside = dict(work.items)  # gets the same answer, so it is consumed
                error = set_aside_error(error, set_aside)
            if set_aside:
                mine["set_aside"] += len(set_aside)
        except EverosError as exc:
            if type(exc).__name__ == "NeedsLLM":
                with transaction(conn):
                    cursors.end_intent(conn, self.name, work.ref, work.key)
                counts["needs_llm"] += 1
                return
            status, error = "failed", str(exc)
        except Exception as exc:  # a bug or an I/O error, maybe after part of the write
            if ctx.runtime.root_gone():
                raise
            status, error = "failed", unexpected(exc)
            ctx.log.error("%s: %s: unexpected error", self.name, work.ref, exc_info=exc)
            # settled as a crash at that point is: the next run's recovery finds what was
            # written under the window's key (indexes it, consumes the window) or withdraws
            keep_intent = not already
        failures = list(derived.failures)
        if status == "ok" and failures:  # part of the window failed
            error = "; ".join(failures)
            if derived.pending >= set(work.items):  # no part succeeded
                status, derived.pending = "failed", set()
            else:
                status = "partial"
        if status in ("ok", "partial") and derived.cut_citations:
            mine["citations_cut"] += len(derived.cut_citations)
            error = "; ".join([*([error] if error else []), *derived.cut_citations])
        if status in ("ok", "partial") and derived.refused:  # said in the row, not the log only
            error = "; ".join([*([error] if error else []), derived.refusal_note()])
        if status == "ok" and derived.needs_llm:
            status, error = "skipped", derived.needs_llm
            ctx.log.info("%s: %s: %s", self.name, work.ref, error)
            mine["needs_llm"] += 1
        elif status == "partial":
            ctx.log.warning("%s: %s partly failed: %s", self.name, work.ref, error)
            mine["owners"] += 1
            mine["failed"] += len(derived.failures)
            mine["written"] += len(derived.outputs)
            mine["refused"] += derived.refused
            mine["clipped"] += derived.clipped
            mine["unshown_records"] += derived.unshown
            mine["left_out_over_budget"] += len(derived.left_out)
        elif status != "ok":
            ctx.log.warning("%s: %s skipped: %s", self.name, work.ref, error)
            mine["failed"] += 1
            derived = self._spent(ctx, budget, tokens_before, derived)
            # the records its calls showed cut were cut all the same (the log names them)
            derived.clipped = budget.clipped - clipped_before
            if derived.clipped:
                mine["clipped"] += derived.clipped
            # and the records they left out to fit the prompt were left out (logged by id)
            mine["left_out_over_budget"] += budget.left_out - left_out_before
        else:
            mine["owners"] += 1
            if derived.outputs and not already:
                mine["written"] += len(derived.outputs)
            if derived.refused:
                mine["refused"] += derived.refused
            if derived.clipped:
                mine["clipped"] += derived.clipped
            if derived.unshown:
                mine["unshown_records"] += derived.unshown
            mine["left_out_over_budget"] += len(derived.left_out)
        self._record(ctx, work, status, derived, error, started, set_aside,
                     keep_intent=keep_intent)
        counts.update(+mine)  # no zero counts
        for failure in failures or ([error or status] if mine["failed"] else []):
            ctx.note_failure(str(work.ref), failure)

    @staticmethod
    def _spent(ctx: RunContext, budget: Budget, before: tuple[int, int],
               derived: Derived) -> Derived:
        """What a failed window's calls cost, from the budget they were charged to: the
        :class:`Derived` its ``derive`` would have returned was lost with the exception, and
        the tokens of the calls that answered, or were refused, were paid for all the same."""
        prompt, completion = budget.token_counts()
        llm = ctx.runtime.llm
        return Derived(derived.outputs, derived.provider or llm.provider,
                       derived.model or llm.model, prompt - before[0], completion - before[1])

    def _record(self, ctx: RunContext, work: Work, status: str, derived: Derived,
                error: str | None, started: float,
                set_aside: Mapping[str, str] | None = None, *,
                keep_intent: bool = False) -> None:
        """One transaction: the cursor moves by the window (on success only: a failed call
        leaves the window pending for the next run, but for the records the server refused
        for good, ``set_aside``, kept under their set-aside keys) and the derivation is
        recorded. ``keep_intent``: the window failed halfway through its write, which the next
        run's :meth:`recover` settles."""
        from everos_reflect.index.audit import Derivation, insert_derivation

        conn = ctx.runtime.db()
        # a partial derivation consumes the window but for its failed parts
        items = {i: h for i, h in work.items.items() if i not in derived.pending}
        rows = items if work.commit is None else {
            i: h for i, h in work.commit.items() if i not in derived.pending}
        with transaction(conn):
            if status in ("ok", "partial"):
                cursors.advance(conn, self.name, work.ref, rows, ctx.run_id)
                self.forget_stale(conn, work.ref, work.state)
            elif set_aside:
                key = self.sent_with(ctx.runtime, ctx.settings).key
                cursors.advance(conn, self.name, work.ref,
                                {i: key(h) for i, h in set_aside.items()}, ctx.run_id)
                self.forget_stale(conn, work.ref, work.state)
            if not keep_intent:
                cursors.end_intent(conn, self.name, work.ref, work.key)
            insert_derivation(conn, Derivation(
                strategy=self.name, ref=work.ref, status=status, run_id=ctx.run_id,
                inputs=list(items if status in ("ok", "partial") else work.items),
                outputs=derived.outputs, provider=derived.provider,
                model=derived.model, prompt_tokens=derived.prompt_tokens,
                completion_tokens=derived.completion_tokens,
                duration_ms=int((time.monotonic() - started) * 1000), error=error))
