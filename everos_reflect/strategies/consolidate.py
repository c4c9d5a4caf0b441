"""Select, Merge, Re-extract and the fact-coverage guard: everything before a merge is written.

Nothing here writes Markdown. :func:`select` reads one cluster's live members from Markdown
and snapshots their content hashes; :func:`draft` asks the LLM for the narrative and its facts;
:func:`measure_coverage` checks that the new facts still state what the sources stated. The
result, a :class:`Draft`, is what :mod:`journal` commits.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from datetime import time as clock

import numpy as np

from everos_reflect.clustering.service import ClusterInfo, ClusterService, entry_epoch
from everos_reflect.embedding.base import Embedder
from everos_reflect.errors import ProviderUnavailable
from everos_reflect.index import reads
from everos_reflect.index.snippet import terms
from everos_reflect.llm.base import (
    LLM,
    FactsRequest,
    MergeMember,
    MergeMode,
    MergeRequest,
    MergeResult,
    Usage,
)
from everos_reflect.llm.budget import estimate_tokens, over_budget, text_tokens
from everos_reflect.llm.extractive import (
    different_holders,
    narrative_sentences,
    plain_sentences,
    split_sentences,
)
from everos_reflect.llm.prompts import Prompts
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Entry, UserRef, one_line_subject, quoted_value
from everos_reflect.provenance import PROVENANCE_KEY, provenance

log = logging.getLogger(__name__)

#: How many unmatched source facts a rejection message quotes.
MISSING_SHOWN = 3


@dataclass(frozen=True)
class Selection:
    """One cluster's merge input, as read from Markdown at Select time.

    ``sources`` are the live ordinary members to fold in (chronological, capped);
    ``existing`` is the live narrative an ``update`` folds them into. ``hashes`` snapshots the
    ``content_hash`` of every entry the merge will archive, so a later edit is detected.
    """

    ref: UserRef
    cluster_id: str
    mode: MergeMode
    sources: tuple[Entry, ...]
    existing: Entry | None
    deferred: int  # live members left for a later run (max_sources_per_merge, the prompt budget)
    #: ``(id, sent hash)`` (:func:`sent_hash`) of every live member Select read (the
    #: narrative and the members deferred included): what a merge refused for good is keyed
    #: by (:attr:`members_key`).
    members: tuple[tuple[str, str], ...] = ()

    @property
    def source_ids(self) -> list[str]:
        return [e.id for e in self.sources]

    @property
    def replaced(self) -> list[Entry]:
        """Every episode the merged narrative replaces: the old narrative first, then sources."""
        return ([self.existing] if self.existing is not None else []) + list(self.sources)

    @property
    def hashes(self) -> dict[str, str]:
        return {e.id: e.content_hash for e in self.replaced}

    @property
    def members_key(self) -> str:
        """The cluster as Select found it: every live member and what a merge sends of it,
        and which of them this merge sends. A merge the server refused for good is set aside
        under this key, so an edit of what a member says or when, a member joining or leaving
        (deferred ones too), or a change of what is sent (a lower ``max_sources_per_merge``
        after a 413) brings it back; an edit of metadata a merge never sends does not."""
        digest = hashlib.sha256()
        for entry_id, sent in sorted(self.members):
            digest.update(f"{entry_id}:{sent}\n".encode())
        digest.update(("sent:" + ",".join(e.id for e in self.replaced)).encode())
        return digest.hexdigest()

    def aside_key(self, prompts: Prompts, target: str) -> str:
        """What a merge the server refused for good is set aside under: :attr:`members_key`,
        plus what of its requests the settings decide -- the prompts
        (:meth:`Prompts.merge_fingerprint`) and ``target``, the provider, model and server
        (:func:`~everos_reflect.strategies.aside.llm_target`), as every tier keys what it
        sets aside (:class:`~everos_reflect.strategies.aside.SentWith`). A person who changes
        a prompt, the language or the model to get past the refusal has the cluster sent
        again (once: refused again, it is set aside under the new key); without them in the
        key it stayed aside until a member changed."""
        from everos_reflect.strategies.aside import SentWith

        return SentWith(prompts.merge_fingerprint(self.mode), target).key(self.members_key)

    @property
    def timestamp(self) -> datetime:
        """The merged narrative's timestamp: the latest replaced entry's (SPEC §3)."""
        return max(_when(e) for e in self.replaced)


@dataclass
class Coverage:
    """How many of the sources' facts the merge still states."""

    score: float
    source_facts: int
    missing: list[str] = field(default_factory=list)

    def explain(self, floor: float) -> str:
        shown = "; ".join(f'"{_clip(m)}"' for m in self.missing[:MISSING_SHOWN])
        more = len(self.missing) - MISSING_SHOWN
        if more > 0:
            shown += f"; and {more} more"
        return f"fact coverage {self.score:.2f} < floor {floor:.2f}; missing: {shown}"


@dataclass
class Draft:
    """A merge ready to commit: the narrative, its facts, who wrote it and what it costs."""

    selection: Selection
    title: str
    content: str
    facts: list[str]
    provider: str
    model: str
    usage: Usage
    seconds: float
    coverage: Coverage | None = None
    #: Per sentence of ``content`` (``split_sentences``), the source Episodes it stands for.
    provenance: tuple[tuple[str, ...], ...] | None = None

    @property
    def words(self) -> int:
        return len(self.content.split())

    def fact_times(self) -> list[datetime]:
        """When each of ``facts`` was said, aligned with them: the day of the narrative's
        line it states (:func:`said_when`), else the narrative's own time."""
        return said_when(self.facts, self.content, self.selection.replaced,
                         self.selection.timestamp)


#: A fact states a narrative sentence when this share of the shorter one's terms is shared.
FACT_LINE_OVERLAP = 0.6


#: The most sentences a fact is compared with (:func:`_sharing`).
MAX_FACT_CANDIDATES = 256


def _sharing(wanted: set[str], postings: dict[str, list[int]]) -> set[int]:
    """The sentences a fact may state: those sharing one of its terms said in at most
    :data:`MAX_FACT_CANDIDATES` sentences, from its rarest term on, until that many are
    found; when every term of it is said more often, the latest sentences saying its rarest.
    A sentence stating the fact shares most of its terms, so its rarest ones; a narrative
    of fewer sentences is read whole. Compared with every sentence, 3,000 facts of a
    3,000-sentence narrative took 10 s."""
    out: set[int] = set()
    for term in sorted(wanted & postings.keys(), key=lambda t: (len(postings[t]), t)):
        posting = postings[term]
        if len(posting) > MAX_FACT_CANDIDATES:
            if not out:
                out.update(posting[-MAX_FACT_CANDIDATES:])
            break
        out.update(posting)
        if len(out) >= MAX_FACT_CANDIDATES:
            break
    return out


def said_when(facts: Sequence[str], content: str, replaced: Sequence[Entry],
              latest: datetime) -> list[datetime]:
    """For each fact, when it was said: the day of the narrative sentence that states it (the
    sentence it is word for word, else the one sharing most of the shorter one's terms, at
    least :data:`FACT_LINE_OVERLAP`, among :func:`_sharing`'s; a ``YYYY-MM-DD:`` line, or a
    dated "Current state (…)" label), at the latest time a replaced entry of that day has
    (the day's start, in ``latest``'s offset, when none of them is of that day: an update's
    older days), never after ``latest``; ``latest`` (the narrative's time) for a fact of an
    undated sentence, of the current state, or that no sentence states.

    Every fact re-extracted from a narrative took the narrative's time, the latest source's:
    "Andrew has no pets yet.", said on 2026-09-01 and replaced by "Andrew now has two dogs"
    on 2026-09-07, was a fact of 2026-09-07, and a briefing served both as that day's."""
    said = narrative_sentences(content)
    bags = [terms(s.text) for s in said]
    exact = {" ".join(s.text.split()): i for i, s in enumerate(said)}  # the later of equals
    postings: dict[str, list[int]] = {}
    for i, bag in enumerate(bags):
        for term in bag:
            postings.setdefault(term, []).append(i)
    of_day: dict[str, datetime] = {}
    for entry in replaced:
        if entry.timestamp is not None:
            day = entry.timestamp.date().isoformat()
            of_day[day] = max(of_day.get(day, entry.timestamp), entry.timestamp)
    out: list[datetime] = []
    for fact in facts:
        found = exact.get(" ".join(fact.split()))
        best = None if found is None else (1.0, found)
        wanted = terms(fact)
        for i in [] if best is not None else _sharing(wanted, postings):
            shared = len(wanted & bags[i])
            share = shared / min(len(wanted), len(bags[i]))
            if share >= FACT_LINE_OVERLAP and (best is None or share > best[0]
                                               or (share == best[0] and i > best[1])):
                best = (share, i)  # ties: the later sentence
        day = said[best[1]].day if best is not None else None
        when = latest
        if day is not None:
            try:
                start = datetime.combine(date.fromisoformat(day), clock(), latest.tzinfo)
            except ValueError:
                start = latest
            when = min(of_day.get(day, start), latest)
        out.append(when)
    return out


def _when(entry: Entry) -> datetime:
    ts = entry.timestamp
    if ts is not None:
        return ts
    return datetime.fromtimestamp(entry_epoch(entry.id, None), UTC)


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- Select


def select(
    store: MarkdownStore,
    clusters: ClusterService,
    info: ClusterInfo,
    *,
    max_sources: int,
    beside: Mapping[str, Collection[str]] | None = None,
) -> Selection | None:
    """What to merge for one eligible cluster, or None when Markdown leaves nothing to do.

    Membership comes from the index; the text and the liveness of every member come from
    Markdown (the truth), so an entry deprecated or deleted by hand is never merged.
    ``beside``: the user's live narratives by the live entries they name
    (:func:`reads.live_narratives_beside`; read here when not given), a run reads it once
    per user.
    """
    ref = info.ref
    live: list[Entry] = []
    members = clusters.members(info.cluster_id)
    found = store.get_many(ref, [m.entry_id for m in members])  # each log parsed once
    for member in members:
        entry = found.get(member.entry_id)
        if entry is None:
            log.info("cluster %s: member %s is gone from Markdown", info.cluster_id,
                     member.entry_id)
            continue
        if entry.deprecated_by is None:
            live.append(entry)
    existing = next((e for e in live if e.id == info.consolidated_entry_id), None)
    others = sorted((e for e in live if e is not existing), key=lambda e: (_when(e), e.id))
    mode: MergeMode = "update" if existing is not None else "init"
    if len(others) < (1 if mode == "update" else 2):
        return None
    cap = max(1, max_sources)
    sources, deferred = others[:cap], max(0, len(others) - cap)
    if beside is None:
        beside = reads.live_narratives_beside(clusters.runtime.db(), ref)
    strays = _stray_narratives(store, ref, sources, existing, beside)
    if strays:  # folded in as the cluster's own narrative would be: one narrative stays
        if existing is None:
            existing, mode = strays.pop(), "update"
        sources = sorted([*sources, *strays], key=lambda e: (_when(e), e.id))
        live = [*live, *(e for e in (existing, *strays) if e is not None and e not in live)]
    return Selection(ref, info.cluster_id, mode, tuple(sources), existing, deferred=deferred,
                     members=tuple((e.id, sent_hash(e)) for e in live))


def _stray_narratives(store: MarkdownStore, ref: UserRef, sources: Sequence[Entry],
                      existing: Entry | None,
                      beside: Mapping[str, Collection[str]]) -> list[Entry]:
    """The live narratives of ``ref`` (by the Markdown) other than ``existing`` that name one
    of ``sources`` and have none of theirs archived toward them, oldest first. Only a hand
    edit makes one: a narrative's sources live again beside it, its log copied with theirs
    into another user's folder, where it names a cluster that user does not hold. Merged
    without them, the sources got a second live narrative beside the first; folded in, the
    merge replaces it as an ``update`` replaces its cluster's narrative. A narrative with
    sources still archived toward it is left alone: the live entry under one of its sources'
    ids may be another (a person replaced that log with one of their own)."""
    named = {n for e in sources for n in beside.get(e.id, ())}
    named -= {e.id for e in sources} | ({existing.id} if existing is not None else set())
    if not named:
        return []
    found = store.get_many(ref, sorted(named))
    strays = [e for e in found.values()
              if e.deprecated_by is None and e.parent_type == "cluster"
              and any(s.id in e.sources for s in sources)]
    if strays:  # wholly beside its sources: none of them archived toward it
        held = store.get_many(ref, sorted({i for e in strays for i in e.sources}))
        strays = [e for e in strays
                  if not any(held[i].deprecated_by == e.id for i in e.sources if i in held)]
    return sorted(strays, key=lambda e: (_when(e), e.id))


# --------------------------------------------------------------------------- Merge + Re-extract


def sent_hash(entry: Entry) -> str:
    """What a merge sends of ``entry`` (:func:`member_of`, the prompt's data block): its
    date, subject and text (its Content and any section a person added). ``content_hash``
    covers every metadata key, so a hand edit of one a merge never sends (``importance``,
    ``session_id``, a metadata key a person added) sent a cluster the server had refused for
    good again, to be refused again."""
    member = member_of(entry)
    return hashlib.sha256(repr((member.timestamp.isoformat(), member.subject,
                                member.content)).encode()).hexdigest()[:32]


#: The sections SPEC §3 names for an Episode; Subject is the title and Summary restates the
#: Content, so neither is merged text. Any other section is a person's own (``## Notes``).
_EPISODE_SECTIONS = frozenset({"Subject", "Summary", "Content"})


def merge_text(entry: Entry) -> str:
    """What ``entry`` says, as a merge reads it: its Content, then each section a person added
    by hand, one paragraph each, headed by its name ("Notes: …" — a bare "tired" from a
    ``## Mood`` section would say nothing). Merging the Content alone archived such a note
    out of live memory with its source, the one copy of what it said."""
    extra = [f"{heading}: {body.strip()}" for heading, body in entry.sections.items()
             if heading not in _EPISODE_SECTIONS and body.strip()]
    return "\n\n".join([entry.content, *extra]) if extra else entry.content


def member_of(entry: Entry) -> MergeMember:
    """The merge input for ``entry`` (:func:`merge_text`); a narrative brings its
    sentence-level provenance, so the sentences an update carries over keep crediting their
    original Episodes. A note a person added to a narrative stands for the narrative's
    sources, as a hand edit of its Content does."""
    text = merge_text(entry)
    rows = None
    if entry.sources or PROVENANCE_KEY in entry.meta:
        rows = tuple(s.sources for s in provenance(entry).sentences)
        if text != entry.content:
            fallback = tuple(entry.sources) or (entry.id,)
            extra = len(split_sentences(text)) - len(rows)
            rows = rows + (fallback,) * max(0, extra)
    return MergeMember(entry.id, _when(entry), entry.subject, text, rows)


def merge_request(selection: Selection, prompts: Prompts) -> MergeRequest:
    """What the merge call of ``selection`` asks, as :func:`draft` sends it."""
    return MergeRequest(
        mode=selection.mode,
        members=[member_of(e) for e in selection.sources],
        existing=member_of(selection.existing) if selection.existing is not None else None,
        prompts=prompts,
    )


def merge_prompt_tokens(selection: Selection, prompts: Prompts) -> int:
    """The estimated tokens of ``selection``'s merge request (:mod:`everos_reflect.llm.budget`)."""
    return estimate_tokens(prompts.merge_messages(merge_request(selection, prompts)))


def facts_prompt_tokens(selection: Selection, prompts: Prompts,
                        narrative_ratio: float = 1.0) -> int:
    """The estimated tokens of the fact extraction that follows ``selection``'s merge, for a
    narrative ``narrative_ratio`` times as long as what it replaces (as a merge reads it,
    :func:`merge_text`: a person's note is merged too): the longest the guard keeps
    (``max_narrative_ratio``; the merge prompt asks for 0.7 times)."""
    instructions = estimate_tokens(prompts.facts_messages(FactsRequest(text="", prompts=prompts)))
    replaced = text_tokens("\n".join(merge_text(e) for e in selection.replaced))
    return instructions + math.ceil(narrative_ratio * replaced)


def fit_prompt(selection: Selection, prompts: Prompts, budget: int | None,
               narrative_ratio: float = 1.0) -> tuple[Selection, str | None]:
    """``selection`` cut to the oldest sources whose merge prompt, and the fact extraction of
    the narrative it may write (:func:`facts_prompt_tokens`), fit in ``budget`` estimated
    tokens (``[llm] max_prompt_tokens``), and None; or ``selection`` and why not even the
    least a merge takes fits (two sources, or the narrative and one new source).

    The sources cut are deferred as ``max_sources_per_merge`` defers them: the next run folds
    them into the narrative this merge writes, in order, as many as fit each time. So a
    cluster too large for one request is merged in chronological parts, never sent whole to
    be refused (its requests were up to 50 × 256 KiB), and a merge is paid only when its
    fact extraction has room too. ``budget`` None: no bound (the offline provider sends no
    prompt)."""
    if budget is None:
        return selection, None
    total = len(selection.sources)

    def cut(count: int) -> Selection:
        if count == total:
            return selection
        return replace(selection, sources=selection.sources[:count],
                       deferred=selection.deferred + total - count)

    def fits(sel: Selection) -> bool:
        return (merge_prompt_tokens(sel, prompts) <= budget
                and facts_prompt_tokens(sel, prompts, narrative_ratio) <= budget)

    if fits(selection):
        return selection, None
    least = 1 if selection.mode == "update" else 2
    smallest = cut(least)
    if not fits(smallest):
        what = ("the narrative and its oldest new source" if selection.mode == "update"
                else f"its {least} oldest sources")
        merge_tokens = merge_prompt_tokens(smallest, prompts)
        if merge_tokens > budget:
            return selection, (f"the merge prompt of {what} is about {merge_tokens:,} tokens, "
                               f"over llm.max_prompt_tokens ({budget:,}); not sent")
        facts_tokens = facts_prompt_tokens(smallest, prompts, narrative_ratio)
        return selection, (f"the fact extraction after merging {what} (a narrative up to "
                           f"{narrative_ratio:g} × their length, max_narrative_ratio) would be "
                           f"about {facts_tokens:,} tokens, over llm.max_prompt_tokens "
                           f"({budget:,}); neither call sent")
    low, high = least, total  # the prompts grow with every source: the most that fit
    while high - low > 1:
        middle = (low + high) // 2
        if fits(cut(middle)):
            low = middle
        else:
            high = middle
    return cut(low), None


def draft(selection: Selection, llm: LLM, prompts: Prompts,
          on_merged: Callable[[Draft], None] | None = None,
          budget: int | None = None) -> Draft:
    """Merge, then re-extract facts from the narrative. Raises ProviderUnavailable.

    ``on_merged`` gets the narrative as a draft without facts between the two calls, so work
    that needs only the narrative (the guard's embeddings of its sentences) can run while
    the facts call is in flight. A narrative whose fact extraction would exceed ``budget``
    (``[llm] max_prompt_tokens``; :func:`fit_prompt` left room for one the guard keeps) is
    a failure of this run alone, carrying the merge's tokens: not set aside, as the next
    merge may write a shorter one. Runs in a worker thread: it touches only the LLM, never
    SQLite or Markdown.
    """
    started = time.perf_counter()
    merged: MergeResult = llm.merge(merge_request(selection, prompts))
    if not merged.content.strip():
        empty = ProviderUnavailable(f"{llm.provider} returned an empty narrative")
        empty.usage = merged.usage  # paid for: the cluster's failed audit row says so
        raise empty
    narrative = Draft(
        selection=selection,
        title=one_line_subject(merged.title) or one_line_subject(_fallback_title(selection)),
        content=merged.content.strip(),
        facts=[],
        provider=merged.provider or llm.provider,
        model=merged.model or llm.model,
        usage=merged.usage,
        seconds=time.perf_counter() - started,
        provenance=_checked_rows(merged.provenance, merged.content.strip()),
    )
    asked = FactsRequest(text=merged.content, prompts=prompts)
    too_big = over_budget(prompts.facts_messages(asked), budget)
    if too_big is not None:
        words = len(narrative.content.split())
        longer = ProviderUnavailable(
            f"the merge's narrative ({words:,} words) is too long for its fact extraction: "
            f"{too_big}; the merge's tokens are counted, and the cluster is merged again "
            "next run (not set aside)")
        longer.usage = merged.usage
        raise longer
    if on_merged is not None:
        on_merged(replace(narrative))
    try:
        facts = llm.extract_facts(asked)
    except ProviderUnavailable as exc:  # the failure carries the merge call's tokens too
        exc.usage = merged.usage if exc.usage is None else merged.usage + exc.usage
        raise
    return replace(narrative, facts=_unique(" ".join(f.split()) for f in facts.facts),
                   usage=merged.usage + facts.usage, seconds=time.perf_counter() - started)


def _checked_rows(rows: tuple[tuple[str, ...], ...] | None,
                  content: str) -> tuple[tuple[str, ...], ...] | None:
    """A provider's provenance if it lines up with the narrative's sentences, else None."""
    if rows is None or len(rows) != len(split_sentences(content)) or not all(rows):
        return None
    return rows


def _fallback_title(selection: Selection) -> str:
    first = selection.existing or selection.sources[0]
    return first.subject or "Merged narrative"


def _unique(texts: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for text in texts:
        if text and text not in seen:
            seen.add(text)
            out.append(text)
    return out


# --------------------------------------------------------------------------- coverage guard


def source_facts(selection: Selection, live_facts: dict[str, list[str]]) -> list[str]:
    """The facts the merge must keep: each replaced entry's live atomic facts, or — for an
    entry that has none — its sentences (Subject excluded), which stand in for facts."""
    out: list[str] = []
    for entry in selection.replaced:
        text = merge_text(entry)
        facts = live_facts.get(entry.id) or split_sentences(text)
        if text != entry.content:  # a note's facts were never extracted: they count too
            facts = [*facts, *split_sentences(text[len(entry.content):])]
        out.extend(facts)
    return _unique(" ".join(f.split()) for f in out)


def best_matches(embedder: Embedder, wanted: Sequence[str], draft_: Draft) -> np.ndarray:
    """For each wanted fact, its best cosine to a new fact or a sentence of the narrative."""
    # without paragraph dates and labels: a kept sentence is then its source's very text, whose
    # vector the run has already computed
    stated = _unique([*draft_.facts, *plain_sentences(draft_.content)])
    if not wanted or not stated:
        return np.zeros(len(wanted), dtype=np.float32)
    vectors = np.asarray(embedder.embed([*wanted, *stated]))
    old, new = vectors[: len(wanted)], vectors[len(wanted):]
    sims = old @ new.T
    # "Mia is allergic to peanuts." does not state "Mia's brother is allergic to peanuts."
    # (cosine 0.91): an LLM merge that wrote one for both lost a fact
    sims[different_holders(wanted, stated)] = -1.0
    return sims.max(axis=1)


def measure_coverage(
    embedder: Embedder,
    wanted: Sequence[str],
    draft_: Draft,
    *,
    match_threshold: float,
) -> Coverage:
    """Share of ``wanted`` facts whose best cosine to a new fact or a narrative sentence is
    at least ``match_threshold``. Nothing wanted means nothing can be lost: coverage 1."""
    if not wanted:
        return Coverage(1.0, 0)
    best = best_matches(embedder, wanted, draft_)
    missing = [fact for fact, score in zip(wanted, best, strict=True)
               if score < match_threshold]
    return Coverage(1.0 - len(missing) / len(wanted), len(wanted), missing)


def source_words(selection: Selection) -> int:
    """Words of everything the narrative replaces (the old narrative too, in update mode)."""
    return sum(len(merge_text(e).split()) for e in selection.replaced)


def longer_than_sources(draft_: Draft, max_ratio: float) -> str | None:
    """Why the narrative saves too few words (None when it is short enough): a merge longer
    than ``max_ratio`` × its sources defeats consolidation and is rejected.

    Allowed on top: one word per new source — its date, which its metadata carried and a
    narrative spanning several days writes out, or the day a "Current state (YYYY-MM-DD):"
    label gives instead — and the label's two words "Current state"."""
    sel = draft_.selection
    words, budget = draft_.words, source_words(sel)
    slack = len(sel.sources) + 2
    if words > max_ratio * budget + slack:
        return (f"narrative has {words} words, more than {max_ratio:g} × its sources' "
                f"{budget} words (+{slack} for dates and a label)")
    return None


#: A number as written in prose: digits, with the separators of "1,200", "3.5" or "10:30".
_NUMBER_RE = re.compile(r"[0-9]+(?:[.,:][0-9]+)*")


def _numbers(text: str) -> set[str]:
    """Each number of ``text`` with leading zeros dropped ("04" and "4" are one day), whole
    and split at its separators (a source's "2026-09-04T10:30" or "3.5" vouches for "4",
    "10", "3" and "5"); "1,200" counts as "1200" too."""
    found: set[str] = set()
    for match in _NUMBER_RE.finditer(text):
        token = match.group()
        found.update(p.lstrip("0") or "0" for p in re.split(r"[.,:]", token))
        found |= _whole(token)
    return found


def _whole(token: str) -> set[str]:
    """A number token as a whole, leading zeros dropped, with and without thousands commas."""
    return {token.lstrip("0") or "0", token.replace(",", "").lstrip("0") or "0"}


def unsupported_numbers(draft_: Draft) -> str | None:
    """Why the narrative or a fact states a number no source states (None when every one is
    in a source's subject, content or date, as the merge call showed them).

    The merge prompt says "do not invent names, dates, numbers": a model that does anyway
    writes a fact nobody said (a year, an age, an amount), and the sources it replaces are
    archived from default search. Numbers are the one kind of invented fact that can be
    checked honestly without a model (names are not: any capitalised word would do), so only
    they are; words for numbers ("two") and non-ASCII digits are not read."""
    allowed: set[str] = set()
    for entry in draft_.selection.replaced:
        member = member_of(entry)
        allowed |= _numbers(f"{member.timestamp.isoformat()} {member.subject} {member.content}")
    for what, text in [("the narrative", f"{draft_.title} {draft_.content}"),
                       *(("a fact", fact) for fact in draft_.facts)]:
        for match in _NUMBER_RE.finditer(text):
            token = match.group()
            if _whole(token) & allowed:
                continue
            return (f"{what} states {quoted_value(token)}, which none of its sources does "
                    "(a merge may not invent numbers or dates)")
    return None


def source_sentences(selection: Selection) -> list[tuple[str, str]]:
    """``(sentence, source id)`` for each sentence of the entries ``selection`` replaces (a
    narrative's sentences stand for the sources its own provenance names): what
    :func:`attribute` matches a narrative's sentences against. They depend on the selection
    alone, so their vectors can be made before the LLM answers."""
    pairs: list[tuple[str, str]] = []
    for entry in selection.replaced:
        member = member_of(entry)
        rows = member.provenance
        for i, text in enumerate(split_sentences(member.content)):
            ids = rows[i] if rows is not None and i < len(rows) else (entry.id,)
            pairs.extend((text, sid) for sid in ids)
    return pairs


def attribute(embedder: Embedder, draft_: Draft, *,
              threshold: float) -> tuple[tuple[str, ...], ...]:
    """Sentence-level provenance for a narrative whose provider gave none (an LLM's prose):
    each narrative sentence stands for the sources with a sentence at cosine ≥ ``threshold``
    to it, or — when none is that close — for the source of its single best match."""
    sentences = split_sentences(draft_.content)
    pairs = source_sentences(draft_.selection)
    if not sentences or not pairs:
        fallback = tuple(e.id for e in draft_.selection.replaced)
        return tuple(fallback for _ in sentences)
    texts = list(dict.fromkeys(t for t, _ in pairs))
    vectors = np.asarray(embedder.embed([*sentences, *texts]))
    sims = vectors[: len(sentences)] @ vectors[len(sentences):].T
    other = different_holders(sentences, texts)  # as best_matches
    other[other.all(axis=1)] = False  # a sentence near only such ones keeps its best match
    sims[other] = -1.0
    column = {t: i for i, t in enumerate(texts)}
    out = []
    for row in sims:
        best = float(row.max())
        ids = [sid for t, sid in pairs if row[column[t]] >= min(threshold, best)]
        out.append(tuple(dict.fromkeys(ids)))
    return tuple(out)


__all__ = [
    "Coverage",
    "Draft",
    "Selection",
    "attribute",
    "best_matches",
    "draft",
    "facts_prompt_tokens",
    "fit_prompt",
    "longer_than_sources",
    "measure_coverage",
    "member_of",
    "merge_request",
    "merge_text",
    "select",
    "source_facts",
    "source_sentences",
    "source_words",
    "unsupported_numbers",
]
