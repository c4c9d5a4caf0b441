"""``reflect_insights`` (seed 000, SPEC §10): experiences → insights that cite their evidence.

Per owner, on the shared tier loop of :mod:`belief_store` (changes cursor, idempotent write,
one ``derivation_report`` row):

1. **Trigger** — the window is every live Episode not yet consumed; due when the sum of their
   ``importance`` reaches ``threshold`` (150) and the owner has ``min_episodes`` (20) live
   Episodes, after ``cooldown_seconds``. Insights never add to the sum. The cursor moves by the
   whole window after every run — one that wrote nothing or failed too — so the accumulator
   resets and a failing owner cannot spin (seed 000's circuit breaker).
2. **Questions** — the 100 most recent live records → the 3 most salient questions.
3. **Evidence** — per question, hybrid search over the owner's Episodes, facts and insights,
   reranked by recency × importance × similarity; the top 8.
4. **Insights** — at most 5 per question, each citing ≥ 2 numbered records (remapped to ids).
5. **Persist** — ``.insights/insight-YYYY-MM-DD.md`` with ``evidence``, ``depth``,
   ``importance``, ``question``, ``status: active`` and ``evidence_hash`` (the text hash of
   each cited record as the insight saw it, so an edit is detectable later).

Offline (extractive provider) the LLM steps are replaced by :mod:`insights_offline`: recurring
topics across weeks found with TF-IDF, stated with counts and dates (``provider: extractive``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from everos_reflect.engine.registry import (
    RunContext,
    SettingSpec,
    count_between,
    positive_up_to,
    run_limit,
)
from everos_reflect.engine.triggers import AccumulatorTrigger
from everos_reflect.errors import EverosError
from everos_reflect.llm.importance import score_importance
from everos_reflect.llm.task_catalog import MIN_CITATIONS
from everos_reflect.model import Entry, Kind, UserRef, id_order
from everos_reflect.problem_words import counted
from everos_reflect.settings import between
from everos_reflect.strategies import beliefs
from everos_reflect.strategies.belief_store import (
    BeliefState,
    BeliefTier,
    Budget,
    Derived,
    Refusals,
    Work,
    derived_meta,
    sync,
    tier_settings,
)

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

NAME = "reflect_insights"
MAX_DEPTH_CAP = 3
RECENT_WINDOW = 100
EVIDENCE_PER_QUESTION = 8
#: Recency decays by this factor per day (Park et al. decay per hour, over a day's memories;
#: a memory store spans months, so the day is the unit here).
RECENCY_DECAY_PER_DAY = 0.99


class LimitReached(EverosError):
    """A run limit (``max_llm_calls``, ``max_tokens``, ``max_wall_seconds``) was hit."""


def importance_of(entry: Entry) -> int:
    """An entry's ``importance`` as written, else the offline score (never written back to a
    hand-written entry: the daemon does not rewrite what it did not create)."""
    value = entry.meta.get("importance")
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 10:
        return value
    return score_importance(f"{entry.subject}. {entry.content}")


def accumulator_due(new_importance: Sequence[int], live_episodes: int, *, threshold: float,
                    min_episodes: int) -> bool:
    """Seed 000's trigger: the importance of Episodes new since the last run sums to at least
    ``threshold``, and the owner has at least ``min_episodes`` live Episodes (the floor)."""
    return live_episodes >= min_episodes and sum(new_importance) >= threshold


def rerank_score(similarity: float, importance: int, age_days: float) -> float:
    """recency × importance × similarity, each in 0..1."""
    recency = RECENCY_DECAY_PER_DAY ** max(0.0, age_days)
    return recency * (importance / 10.0) * max(0.0, similarity)


_depth_problem = between(1, MAX_DEPTH_CAP, shown=f"between 1 and {MAX_DEPTH_CAP}")
#: The most ``threshold``: importance is 1 to 10 an Episode, so 100,000 is 10,000 Episodes of
#: the highest; ``1e12`` was taken, a sum no owner reaches, and the tier never ran.
MAX_THRESHOLD = 100_000
#: The most ``min_episodes``: a floor of 100,000 live Episodes is already past most memories.
MAX_MIN_EPISODES = 100_000


def _settings() -> tuple[SettingSpec, ...]:
    mine = (
        SettingSpec("threshold", float, 150.0,
                    "Summed importance of new Episodes that triggers a run.",
                    positive_up_to(MAX_THRESHOLD, "summed importance: 10,000 Episodes of "
                                   "importance 10")),
        SettingSpec("min_episodes", int, 20,
                    "No run for an owner with fewer live Episodes.",
                    count_between(1, MAX_MIN_EPISODES, "live Episodes of one owner")),
        SettingSpec("questions", int, 3, "Salient questions per run.",
                    count_between(1, 10)),
        SettingSpec("insights_per_question", int, 5, "Insights kept per question.",
                    count_between(1, 10)),
        SettingSpec("max_depth", int, 2,
                    "Deepest insight (an insight citing an insight is depth 2; at most 3).",
                    _depth_problem),
        SettingSpec("max_records", int, 1000,
                    "New Episodes a run consumes; an owner's window is never cut (the "
                    "accumulator), the run stops between owners once past it.",
                    run_limit),
    )
    names = {s.name for s in mine}
    common = tuple(s for s in tier_settings(cooldown=120.0) if s.name not in names)
    return mine + common


class ReflectInsights(BeliefTier):
    name = NAME
    #: its calls show recent records and search results, not the window (an accumulator)
    defer_left_out = False
    description = "Turn accumulated Episodes into insights that cite their evidence (seed 000)."
    output_kind = Kind.INSIGHT
    task = "insights"
    sent_tasks = ("questions", "insights")
    settings = _settings()
    data_trigger = AccumulatorTrigger(field="importance", threshold=1.0)  # observe: owners due
    reads = "Episodes"

    def run(self, ctx: RunContext) -> dict[str, int]:
        """Bring the index up to date (evidence comes from search), then the tier loop."""
        from everos_reflect.index.sync import Indexer

        ctx.logs_indexed += Indexer(ctx.runtime).scan().logs_indexed
        return super().run(ctx)

    # -- the window and the trigger --------------------------------------------------------

    def candidates(self, state: BeliefState, settings: Mapping[str, Any]) -> dict[str, str]:
        return {e.id: e.text_hash for e in self._episodes(state)}

    def pending(self, runtime: Runtime, ref: UserRef, settings: Mapping[str, Any],
                state: BeliefState | None = None, *,
                done: Collection[beliefs.Seen] | None = None,
                ) -> tuple[BeliefState, dict[str, str]]:
        """Every new Episode (the accumulator is not capped by ``max_records``), but those
        set aside under the prompts and model a run would send now. ``done``: the cursor
        rows already read, else read here (once: this tier's poll reads nothing else)."""
        from everos_reflect.index import cursors

        state = state or InsightState.load(runtime, ref)
        candidates = self.candidates(state, settings)
        if done is None:
            done = cursors.consumed(runtime.db(), self.name, ref)
        aside = self.sent_with(runtime, settings).key
        return state, {i: candidates[i] for i in beliefs.window(candidates, done, aside)}

    def due(self, state: BeliefState, window: list[str], settings: Mapping[str, Any]) -> bool:
        episodes = {e.id: e for e in self._episodes(state)}
        return accumulator_due(
            [importance_of(episodes[i]) for i in window if i in episodes], len(episodes),
            threshold=float(settings.get("threshold", 150.0)),
            min_episodes=int(settings.get("min_episodes", 20)))

    def progress(self, state: BeliefState, window: list[str],
                 settings: Mapping[str, Any]) -> str:
        """The accumulator against its two bars (:meth:`due`): "importance 12 of 150 from 3
        new Episodes, 5 of 20 live Episodes"."""
        episodes = {e.id: e for e in self._episodes(state)}
        total = sum(importance_of(episodes[i]) for i in window if i in episodes)
        return (f"importance {total:g} of {float(settings.get('threshold', 150.0)):g} from "
                f"{len(window)} new Episodes, {len(episodes)} of "
                f"{int(settings.get('min_episodes', 20))} live Episodes")

    @staticmethod
    def _episodes(state: BeliefState) -> list[Entry]:
        return [e for e in getattr(state, "episodes", []) if e.deprecated_by is None]

    def needs_llm(self, runtime: Runtime) -> str | None:
        """Offline, the extractive method of :mod:`insights_offline` runs instead of an LLM —
        but it can only state topics recurring across ``MIN_WEEKS`` weeks, so when no owner's
        live Episodes span that many weeks the tier needs an LLM to write anything. A root not
        indexed yet is not judged (a run indexes it first): opening ``system.db`` to ask would
        create an empty index that ``status`` then took for the root's counts."""
        if super().needs_llm(runtime) is None:
            return None
        from everos_reflect.index.db import db_built
        from everos_reflect.index.reads import live_episode_weeks

        if not db_built(runtime.root):
            return None
        from everos_reflect.strategies.insights_offline import MIN_WEEKS

        if max(live_episode_weeks(runtime.db()).values(), default=0) >= MIN_WEEKS:
            return None
        return offline_reason()

    def owner_work(self, runtime: Runtime, ref: UserRef, settings: Mapping[str, Any], *,
                   force: bool = False, fix: bool = False) -> Work | None:
        state, items = self.pending(runtime, ref, settings, InsightState.load(runtime, ref))
        if not items and not force:
            return None
        if force or self.due(state, list(items), settings):
            return Work(ref, state, items, beliefs.window_key(self.name, str(ref), items))
        return None

    def _record(self, ctx: RunContext, work: Work, status: str, derived: Derived,
                error: str | None, started: float,
                set_aside: Mapping[str, str] | None = None, *,
                keep_intent: bool = False) -> None:
        """As the tier loop, but the window is consumed after a failed run too: the
        accumulator resets after every run (seed 000). A window the server refused for good
        is only set aside (under the prompts and model, as the tier loop keeps it), so a
        changed prompt or model brings it back to the accumulator once."""
        from everos_reflect.index import cursors
        from everos_reflect.index.db import transaction

        super()._record(ctx, work, status, derived, error, started, set_aside,
                        keep_intent=keep_intent)
        rest = {i: h for i, h in work.items.items() if i not in (set_aside or {})}
        if status != "ok" and rest:
            conn = ctx.runtime.db()
            with transaction(conn):
                cursors.advance(conn, self.name, work.ref, rest, ctx.run_id)

    def calls_per_unit(self, settings: Mapping[str, Any]) -> int:
        """One questions call, then one insights call per question."""
        return 1 + int(settings.get("questions", 3))

    # -- one owner -------------------------------------------------------------------------

    def derive(self, ctx: RunContext, work: Work, budget: Budget) -> Derived:
        state: InsightState = work.state  # type: ignore[assignment]
        if ctx.runtime.llm.provider == "extractive":
            from everos_reflect.strategies.insights_offline import recurring_topics

            found = recurring_topics(self._episodes(state),
                                     limit=int(ctx.settings.get("questions", 3)))
            derived = Derived(provider="extractive", model="tfidf-recurring-topics")
            if not found:  # nothing honest to say offline: write nothing, say why
                derived.needs_llm = offline_reason(owner=True)
                return derived
            derived = self._write(ctx, work, state, [
                (t.question, t.text, t.evidence) for t in found], derived)
            sync(ctx.runtime, supersede_topics(ctx.runtime, work.ref))
            return derived
        derived = Derived()
        questions = self._asked(ctx, work.ref, self._questions(ctx, state, budget, derived),
                                derived)
        proposals: list[tuple[str, str, list[str]]] = []
        for question in questions:
            evidence = self.evidence(ctx.runtime, work.ref, state, question,
                                     max_depth=int(ctx.settings.get("max_depth", 2)))
            if len(evidence) < 2:
                continue
            found = self.ask(ctx, budget, "insights", [_record(e) for e in evidence], {
                "question": question,
                "count": str(ctx.settings.get("insights_per_question", 5))}, derived,
                min_records=MIN_CITATIONS)  # best-ranked first: the last left out first
            proposals += [(question, text, ids) for text, ids in found]
        return self._write(ctx, work, state, proposals, derived)

    def _questions(self, ctx: RunContext, state: InsightState, budget: Budget,
                   derived: Derived) -> list[str]:
        recent = sorted(state.live_records(), key=lambda e: (_ts(e), id_order(e.id)),
                        reverse=True)[:RECENT_WINDOW]
        return self.ask(ctx, budget, "questions", [_record(e) for e in reversed(recent)],
                        {"count": str(ctx.settings.get("questions", 3))}, derived,
                        keep_last=True)  # chronological: the oldest left out first

    def _asked(self, ctx: RunContext, ref: UserRef, questions: Sequence[str],
               derived: Derived) -> list[str]:
        """The questions of the reply that may be asked, each refused alone (named in the
        run's derivation row) when it is over :data:`~everos_reflect.llm.task_catalog.
        MAX_QUESTION_CHARS` or holds a control or invisible formatting character: it failed
        the whole questions call, and the run with it, retried and failing on every run."""
        from everos_reflect.llm.task_catalog import MAX_QUESTION_CHARS

        refusals = Refusals(ctx.log, f"{self.name}: {ref}")
        kept = []
        for question in questions:
            problem = beliefs.text_problem(question, limit=MAX_QUESTION_CHARS, what="it")
            if problem is not None:
                refusals.add(f"question refused: {problem}")
            else:
                kept.append(question)
        derived.take(refusals)
        return kept

    def ask(self, ctx: RunContext, budget: Budget, task: str, records: Sequence[Any],
            values: Mapping[str, str], derived: Derived, *, min_records: int = 1,
            keep_last: bool = False) -> Any:
        """One task call, refused with :class:`LimitReached` once a run limit is hit."""
        if budget.llm_calls >= budget.max_llm_calls:  # reserved up front; never passed
            raise LimitReached(f"max_llm_calls ({budget.max_llm_calls}) reached")
        return self.call(ctx, budget, records, values, derived, task,
                         min_records=min_records, keep_last=keep_last)

    def evidence(self, runtime: Runtime, ref: UserRef, state: InsightState,
                 question: str, *, top: int = EVIDENCE_PER_QUESTION,
                 max_depth: int | None = None) -> list[Entry]:
        """Hybrid search over the owner's live Episodes, facts and insights, reranked by
        recency × importance × similarity. With ``max_depth``, an insight already that deep
        is no evidence: an insight citing it would be deeper than the cap and refused, so
        shown, it took one of the ``top`` places and made the model's insights citing it
        refused (as the belief tiers, no record is shown that could not be cited)."""
        from everos_reflect.index.search import search

        live = {e.id: e for e in state.live_records()
                if max_depth is None or not e.kind.derived
                or beliefs.depth_of(e) < max_depth}
        now = datetime.now(UTC)
        scored: list[tuple[float, Entry]] = []
        for kind in (Kind.EPISODE, Kind.ATOMIC_FACT, Kind.INSIGHT):
            try:
                # whole entries are the evidence: one item per entry, not its passages
                hits = search(runtime, question, top_k=top * 3, user_id=ref.user_id,
                              app_id=ref.app, project_id=ref.project, kind=kind,
                              passages_per_entry=1)
            except EverosError:
                continue
            for hit in hits:
                entry = live.get(hit.id)
                if entry is None:
                    continue
                ts = entry.timestamp or now
                age = (now - ts).total_seconds() / 86400.0
                scored.append((rerank_score(hit.score, importance_of(entry), age), entry))
        scored.sort(key=lambda pair: (-pair[0], id_order(pair[1].id)))
        seen: set[str] = set()
        out = []
        for _, entry in scored:
            if entry.id not in seen:
                seen.add(entry.id)
                out.append(entry)
        return out[:top]

    def _write(self, ctx: RunContext, work: Work, state: InsightState,
               proposals: list[tuple[str, str, list[str]]], derived: Derived) -> Derived:
        rt, ref = ctx.runtime, work.ref
        cap = int(ctx.settings.get("max_depth", 2))
        records = state.by_id_all()
        # An insight a live one (or one earlier in this run) already states is not new: a model
        # answering every question with the same sentence wrote it once per question and
        # again on each run, and each copy counted toward update_worldview's trigger.
        stated = {beliefs.text_key(e.content): e.id for e in state.insights if beliefs.is_live(e)}
        rows = []
        refusals = Refusals(ctx.log, f"{self.name}: {ref}")
        for question, text, ids in proposals:
            cited = [records[i] for i in ids if i in records]
            if not text:
                refusals.add("insight refused: it has no text")
                continue
            if (problem := beliefs.text_problem(text)) is not None:
                refusals.add(f"insight refused: {problem}")
                continue
            if len(cited) < MIN_CITATIONS:
                refusals.add(f"insight refused: it cites {counted(len(cited), 'record')}, at "
                             f"least {MIN_CITATIONS} needed")
                continue
            key = beliefs.text_key(text)
            if key in stated:
                refusals.add(f"insight refused: it repeats "
                             f"{stated[key] or 'an insight of this run'}")
                continue
            depth = beliefs.derived_depth(beliefs.depth_of(e) if e.kind.derived else 0
                                          for e in cited)
            if depth > cap:
                refusals.add(f"insight refused: depth {depth} > max_depth {cap}")
                continue
            stated[key] = ""
            meta = derived_meta(evidence=[e.id for e in cited], depth=depth, key=work.key,
                                extra={"importance": max(importance_of(e) for e in cited),
                                       "question": question,
                                       "insight_type": "reflection",
                                       "provider": derived.provider or rt.llm.provider})
            meta["evidence_hash"] = {e.id: e.text_hash for e in cited}
            rows.append((meta, {"Insight": text}))
        derived.take(refusals)
        if not rows:
            return derived
        written = rt.store.append_many(ref, Kind.INSIGHT, rows, derived=True)
        sync(rt, {rt.store.path_for_id(ref, e.id) for e in written})
        derived.outputs = [e.id for e in written]
        return derived


class InsightState(BeliefState):
    """The tier state plus the owner's Episodes and atomic facts (the insights' evidence)."""

    episodes: list[Entry]
    facts: list[Entry]

    @classmethod
    def load(cls, runtime: Runtime, ref: UserRef) -> InsightState:
        store = runtime.store
        state = cls(store.entries(ref, Kind.INSIGHT), store.entries(ref, Kind.CONVICTION),
                    store.entries(ref, Kind.RELATION))
        state.episodes = store.entries(ref, Kind.EPISODE)
        state.facts = store.entries(ref, Kind.ATOMIC_FACT)
        return state

    def live_records(self) -> list[Entry]:
        return [e for e in (*self.episodes, *self.facts, *self.insights)
                if e.deprecated_by is None and beliefs.status_of(e) == beliefs.ACTIVE]

    def by_id_all(self) -> dict[str, Entry]:
        return {e.id: e for e in (*self.episodes, *self.facts, *self.insights)}


def supersede_topics(runtime: Runtime, ref: UserRef) -> set[Path]:
    """Archive each offline topic insight that a later count of the same topic replaced
    (``deprecated_entries``, toward the newest); the files written. "'deploy' comes up in 4
    episodes" stayed live, and served, beside "'deploy' comes up in 13 episodes" written
    weeks later: the older count is no longer true. Idempotent, so a run killed between
    writing a count and archiving the one before is finished by the next offline run."""
    from everos_reflect.strategies.belief_store import DERIVATION_KEY
    from everos_reflect.strategies.insights_offline import topic_of

    by_term: dict[str, list[Entry]] = {}
    for entry in runtime.store.entries(ref, Kind.INSIGHT):
        if (entry.deprecated_by is None and DERIVATION_KEY in entry.meta
                and entry.meta.get("provider") == "extractive"
                and (term := topic_of(entry.content)) is not None):
            by_term.setdefault(term, []).append(entry)
    archive: dict[str, str] = {}
    for versions in by_term.values():
        versions.sort(key=lambda e: (beliefs.instant(e.timestamp), id_order(e.id)))
        archive.update({old.id: versions[-1].id for old in versions[:-1]})
    if archive:
        runtime.store.deprecate(ref, archive)
    return {runtime.store.path_for_id(ref, i) for i in archive}


def offline_reason(*, owner: bool = False) -> str:
    """Why the insights tier writes nothing without an LLM (for ``status`` and the audit)."""
    from everos_reflect.strategies.belief_store import NEEDS_LLM
    from everos_reflect.strategies.insights_offline import MIN_WEEKS

    why = ("this owner's Episodes show none" if owner else
           f"no owner's live Episodes span {MIN_WEEKS}+ weeks")
    return (f"{NEEDS_LLM}: offline, insights are only stated for topics recurring across "
            f"{MIN_WEEKS}+ weeks (TF-IDF), and {why}; set [llm] "
            "provider = \"openai\" with a base_url/api_key for LLM insights")


def _ts(entry: Entry) -> float:
    ts = entry.timestamp
    return ts.timestamp() if ts else -math.inf


def _record(entry: Entry) -> Any:
    from everos_reflect.llm.tasks import Record

    label = {Kind.EPISODE: "episode", Kind.ATOMIC_FACT: "fact"}.get(entry.kind, "insight")
    text = f"{entry.subject}: {entry.content}" if entry.subject else entry.content
    return Record(entry.id, label, text, entry.timestamp)


__all__ = ["NAME", "InsightState", "ReflectInsights", "accumulator_due", "importance_of",
           "rerank_score"]
