"""The coverage guard's measurements for Reflection's drafts, with their embeddings batched.

An embedding call has a large fixed cost next to its per-text cost (the bundled model in its
low-memory mode spends tens of milliseconds per call before the first text), and one draft
needs only a few dozen short texts: its source facts, its new facts and sentences, the sources'
sentences (attribution) and the narrative itself (the commit re-indexes it).

The LLM workers hand their drafts to the guard's own thread and go on to their next call; that
thread measures every draft queued since its last pass with one embedding call for all their
texts (drafts finished while it embeds queue up for the next). The vectors land in the
runtime's embedding cache; each draft is then measured exactly as alone, every lookup a cache
hit. One embedding call at a time (memory, and a 2-core machine).

Which texts a draft needs is found by measuring it once against :class:`TextProbe`, which
records the texts it is asked for and answers zeros: the texts the guard embeds never depend
on the vectors, so the list is exact whatever the guard's code asks for.

Most of those texts are known before the draft is: the sources' sentences and facts when the
merge call goes out (:meth:`Guard.prefetch_sources` embeds them while it is in flight), the
narrative's sentences once it has answered (:meth:`Guard.prefetch`, while the facts call is in
flight), so measuring the finished draft embeds little more than its new facts, and the last
drafts of a run wait for the guard only that long. The narrative's indexed text, which only
the commit needs, waits until the guard has nothing else to do
(:meth:`Guard.prefetch_indexed`). The model
is loaded on the guard's thread when the run starts (:meth:`Guard.__enter__`), while the
first LLM calls are in flight, not when the first draft needs it; a run talking to a model
over the network holds that start-up work (``hold``) until its first requests are out, since
the model load and the index import hold the interpreter lock for long stretches and would
delay them (to the first request: ~0.1 s without them, 0.23-0.34 s with them, idle).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from everos_reflect.embedding.base import Embedder
from everos_reflect.index import reads
from everos_reflect.model import Kind, UserRef, indexed_text
from everos_reflect.strategies.consolidate import (
    Draft,
    Selection,
    attribute,
    longer_than_sources,
    measure_coverage,
    source_facts,
    source_sentences,
)

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)


#: ``{episode id: [(fact id, fact text), ...]}``: the live facts a draft is measured against.
Facts = dict[str, list[tuple[str, str]]]


class TextProbe:
    """An embedder that embeds nothing: it records the texts asked for and answers zeros."""

    name = "probe"

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        return np.zeros((len(texts), self.dim), dtype=np.float32)


@dataclass
class _Job:
    selection: Selection
    facts: Facts
    draft: Draft | None = None  # None: the selection's own texts only (prefetch)
    verdict: Future[str | None] | None = field(default_factory=Future)  # None: prefetch only


class Guard:
    """Measures drafts (coverage, length verdict, attribution) on a thread of its own,
    batching their embeddings. Use as a context manager around the drafting: leaving it waits
    for the measurements queued."""

    def __init__(self, runtime: Runtime, *, match_threshold: float, max_ratio: float,
                 hold: Callable[[], object] | None = None) -> None:
        self.rt = runtime
        #: called on each start-up thread before its work (the model load, the index open):
        #: returns when that work may start
        self._hold = hold
        self.match = match_threshold
        self.max_ratio = max_ratio
        self._embedding = threading.Lock()  # one embedding call at a time
        self._queue_lock = threading.Lock()
        self._queue: list[_Job] = []
        self._thread: ThreadPoolExecutor | None = None
        self._warming: threading.Thread | None = None
        #: embedding calls made for batches, drafts they measured, narratives and selections
        #: they prefetched for (for tests and logs)
        self.batches = self.batched = self.prefetched = self.prefetched_sources = 0
        #: clusters whose stored source-fact vectors an earlier job brought (guard thread only)
        self._reused: set[tuple[UserRef, str]] = set()
        #: narratives' indexed texts waiting for the guard to be idle (:meth:`prefetch_indexed`)
        self._indexed: dict[str, None] = {}

    def __enter__(self) -> Guard:
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="reflect-guard")
        self._thread.submit(self._warm_up)
        # the vector index too (its first use imports lancedb: ~1.2 CPU-s, ~1 s idle, ~3 s
        # loaded), beside the model rather than after it on the guard's thread
        self._warming = threading.Thread(target=self._open_vectors, daemon=True,
                                         name="reflect-guard-vectors")
        self._warming.start()
        return self

    def _open_vectors(self) -> None:
        """Open the runtime's vector index, which the guard's first pass reads. One that
        fails to open fails that pass as before."""
        self._held()
        try:
            self.rt.vectors  # noqa: B018 - a cached property: opening it is the point
        except Exception:
            log.debug("vector index warm-up failed", exc_info=True)

    def _warm_up(self) -> None:
        """Guard thread: load the embedding model now, while the first LLM calls are in
        flight, rather than when the first draft needs it. A model that fails to load fails
        that draft's measurement as before."""
        self._held()
        inner = getattr(self.rt.embedder, "inner", self.rt.embedder)
        load = getattr(inner, "load", None)
        if load is not None:
            try:
                load()
            except Exception:  # the first embedding call raises it again
                log.debug("embedder warm-up failed", exc_info=True)

    def _held(self) -> None:
        if self._hold is not None:
            try:
                self._hold()
            except Exception:  # never keeps the work from starting
                log.debug("guard start-up hold failed", exc_info=True)

    def __exit__(self, *exc: object) -> None:
        assert self._thread is not None
        self._thread.shutdown(wait=True)
        self._thread = None
        if self._warming is not None:
            self._warming.join()
            self._warming = None

    def submit(self, result: Draft, facts: Facts) -> Future[str | None]:
        """Queue ``result`` for measuring (any thread). The future sets ``result.coverage``
        (and its provenance, for prose without one) and holds why it is too long (None when
        it is not), or fails with what measuring its batch raised."""
        assert self._thread is not None, "Guard used outside its with-block"
        job = _Job(result.selection, facts, result)
        with self._queue_lock:
            self._queue.append(job)
        self._thread.submit(self._drain)
        assert job.verdict is not None
        return job.verdict

    def prefetch(self, narrative: Draft, facts: Facts) -> None:
        """Queue the embeddings measuring ``narrative`` (a draft whose facts are not known yet)
        needs: its sentences, its sources' sentences and facts. They land in
        the embedding cache, where measuring the finished draft finds them. Nothing is decided
        from them; without a cache this does nothing."""
        self._enqueue(_Job(narrative.selection, facts, narrative, None))

    def prefetch_sources(self, selection: Selection, facts: Facts) -> None:
        """Queue the embeddings measuring any draft of ``selection`` needs whatever the LLM
        answers: its source facts (their stored vectors, read from the index) and its
        sources' sentences (which a prose narrative's sentences are attributed to). Called as
        the merge call goes out, they are made while it is in flight, so the narrative's own
        prefetch, once it answers, embeds only the narrative's sentences: at the end of a run
        the last drafts wait for the guard that much less. Nothing is decided from them;
        without a cache this does nothing."""
        self._enqueue(_Job(selection, facts, None, None))

    def _enqueue(self, job: _Job) -> None:
        if self._thread is None or getattr(self.rt.embedder, "remember", None) is None:
            return
        with self._queue_lock:
            self._queue.append(job)
        self._thread.submit(self._drain)

    def _drain(self) -> None:
        """Guard thread: measure every draft queued so far (none when an earlier call took
        them all)."""
        with self._embedding:  # drafts queued while another call embedded come along
            with self._queue_lock:
                jobs, self._queue = self._queue, []
            try:
                self._measure_many(jobs)
            except BaseException as exc:
                for job in jobs:
                    if job.verdict is not None and not job.verdict.done():
                        job.verdict.set_exception(exc)
            with self._queue_lock:
                idle, indexed = not self._queue, list(self._indexed)
                if idle:
                    self._indexed = {}
            if idle and indexed:
                self._embed_indexed(indexed)

    def prefetch_indexed(self, narrative: Draft) -> None:
        """Queue the narrative's indexed text (the text the commit's re-index embeds for it),
        to be embedded when the guard has nothing else to do: it is a long text, about half
        of what a draft asks of the model, and only the commit needs it, so it never delays
        a verdict. The commit embeds any it does not find in the cache."""
        if self._thread is None or getattr(self.rt.embedder, "remember", None) is None:
            return
        with self._queue_lock:
            self._indexed[narrative_text(narrative)] = None
        self._thread.submit(self._drain)

    def _embed_indexed(self, texts: list[str]) -> None:
        try:
            self.rt.embedder.embed(texts)
        except Exception:  # only the commit needed them: it embeds them itself
            log.debug("embedding the narratives' indexed texts failed", exc_info=True)

    def remeasure(self, result: Draft, facts: Facts) -> str | None:
        """The run's thread, when a draft's facts changed after its worker measured it: the
        same measurement, alone."""
        with self._embedding:
            self.reuse_stored_vectors(result.selection.ref, facts)
            return self._measure(result, facts, self.rt.embedder)

    def _measure_many(self, jobs: list[_Job]) -> None:
        if not jobs:  # an earlier pass took them all
            return
        todo: list[tuple[UserRef, Facts]] = []
        for job in jobs:
            key = (job.selection.ref, job.selection.cluster_id)
            if key not in self._reused:
                todo.append((job.selection.ref, job.facts))
                self._reused.add(key)
            if job.verdict is not None:  # a cluster's last job: its prefetches did the rest
                self._reused.discard(key)
        if getattr(self.rt.embedder, "remember", None) is None:
            self.reuse_stored_vectors_many(todo)
        else:  # a cache keeps them
            # every text measuring needs: then every lookup below is a cache hit. Not the
            # narrative as the commit's re-index embeds it (see prefetch_indexed): at the end
            # of a run, the guard's last passes are what the last drafts wait for
            texts: list[str] = []
            for job in jobs:
                texts += (self.source_texts(job.selection, job.facts) if job.draft is None
                          else self.measuring_texts(job.draft, job.facts))
            texts = list(dict.fromkeys(texts))
            if self._warming is not None and self._warming.is_alive():
                self._embed_before_the_index_opens(texts, todo)
            self.reuse_stored_vectors_many(todo)
            self.rt.embedder.embed(texts)
            self.batches += 1
            self.batched += sum(job.verdict is not None for job in jobs)
            self.prefetched += sum(job.verdict is None and job.draft is not None
                                   for job in jobs)
            self.prefetched_sources += sum(job.draft is None for job in jobs)
        for job in jobs:
            if job.verdict is not None:
                assert job.draft is not None
                job.verdict.set_result(self._measure(job.draft, job.facts, self.rt.embedder))

    def _embed_before_the_index_opens(self, texts: list[str],
                                      todo: list[tuple[UserRef, Facts]]) -> None:
        """The run's first passes, while the vector index is still opening (its import takes
        ~1 s, and the stored vectors of the source facts come from it): embed the texts that
        cannot be there (the drafts' own sentences and facts, the sources' sentences) now,
        rather than waiting idle; the source facts wait for their stored vectors."""
        stored = {" ".join(text.split())
                  for _, facts in todo for fs in facts.values() for _, text in fs}
        fresh = [text for text in texts if " ".join(text.split()) not in stored]
        if fresh:
            self.rt.embedder.embed(fresh)

    @staticmethod
    def source_texts(selection: Selection, facts: Facts) -> list[str]:
        """The texts measuring any draft of ``selection`` embeds whatever its narrative: the
        source facts (:func:`measure_coverage`) and the sources' sentences
        (:func:`attribute`)."""
        wanted = source_facts(selection, {p: [t for _, t in fs] for p, fs in facts.items()})
        return [*wanted, *dict.fromkeys(text for text, _ in source_sentences(selection))]

    def measuring_texts(self, result: Draft, facts: Facts) -> list[str]:
        """Every text measuring ``result`` embeds."""
        probe = TextProbe(self.rt.embedder.dim)
        self._measure(replace(result), facts, probe)  # a copy: the probe's verdicts are void
        return probe.texts



    def _measure(self, result: Draft, facts: Facts, embedder: Embedder) -> str | None:
        sel = result.selection
        wanted = source_facts(sel, {p: [t for _, t in fs] for p, fs in facts.items()})
        result.coverage = measure_coverage(embedder, wanted, result, match_threshold=self.match)
        too_long = longer_than_sources(result, self.max_ratio)
        if result.provenance is None and too_long is None:
            result.provenance = attribute(embedder, result, threshold=self.match)
        return too_long

    def reuse_stored_vectors(self, ref: UserRef, facts: Facts) -> None:
        """Hand the guard the source facts' vectors from the index instead of embedding them
        again: the run's scan just made the index current, so a fact whose embedded text is
        exactly its Fact text has its vector there already."""
        self.reuse_stored_vectors_many([(ref, facts)])

    def reuse_stored_vectors_many(self, items: list[tuple[UserRef, Facts]]) -> None:
        """:meth:`reuse_stored_vectors` for the drafts of one pass at once: one vector-table
        query per user, not per draft (a query costs ~25 ms of CPU however few rows it
        returns, and the guard's thread is a Reflection run's bottleneck on a small machine).
        Each query asks for its facts by key, so it reads no more rows than it needs however
        many facts the user has."""
        remember = getattr(self.rt.embedder, "remember", None)
        if remember is None:
            return
        wanted: dict[UserRef, dict[str, str]] = {}  # fact id -> text, per user
        for ref, facts in items:
            for fs in facts.values():
                wanted.setdefault(ref, {}).update(fs)
        exact = {ref: reads.facts_embedded_as_stated(self.rt.db(), ref, list(pairs),
                                                     self.rt.embedder.name)
                 for ref, pairs in wanted.items() if pairs}
        stored = {ref: self.rt.vectors.get_vectors(Kind.ATOMIC_FACT, ref, sorted(ids))
                  for ref, ids in exact.items() if ids}
        texts: list[str] = []
        vectors: list[np.ndarray] = []
        for ref, pairs in wanted.items():
            found = stored.get(ref, {})
            for fid, text in pairs.items():
                if fid in found:
                    texts.append(" ".join(text.split()))
                    vectors.append(found[fid])
        if texts:
            remember(texts, np.stack(vectors))


def narrative_text(result: Draft) -> str:
    """The text the index will embed for the narrative, by the index's own rule."""
    return indexed_text(result.title, None, result.content)


__all__ = ["Facts", "Guard", "TextProbe", "narrative_text"]
