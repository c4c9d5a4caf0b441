"""Memory search: vector, keyword (BM25) or hybrid, over one kind of entry.

Hybrid runs both searches and fuses them with reciprocal-rank fusion (RRF): ranks, not raw
scores, are combined, so the cosine and BM25 scales never need calibrating against each other,
and an entry found by both rises above one found by either alone.

A result is a *passage*, not only an entry. Each hit carries the passage of its entry that
answers (``snippet``); a hybrid search of Episodes may also return further passages of the
same entry as items of their own (``passage`` 1, 2 ...), each opened on another of the entry's
facts near the query and ranked by that fact: the entry's score scaled by how far below the
entry's best fact it ranks (``(RRF_K + best) / (RRF_K + its rank)``, the RRF weight of the two
ranks). A narrative that merged three sessions then answers with the passages a question needs,
as the sessions did before the merge, instead of one passage and its other sessions' facts
out of reach of a caller who reads snippets. At most ``passages_per_entry`` items per entry, so
no single entry (a whole history in one) can fill the result.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from everos_reflect.embedding.base import embed_query
from everos_reflect.errors import EverosError, InvalidSearch
from everos_reflect.index.filters import where_clause
from everos_reflect.index.recency import RECENCY_COSINE, key, latest_first
from everos_reflect.index.snippet import make_passages
from everos_reflect.model import (
    MAX_QUERY_CHARS,
    Kind,
    UserRef,
    blank,
    json_got,
    must_not_be_empty,
    query_control_problem,
    query_length_problem,
    served_status,
    surrogate_problem,
)
from everos_reflect.problem_words import one_of
from everos_reflect.procedural.lessons import (
    LIVE_STATUSES,
    lesson_status,
    rivals_decide,
    served_statuses,
)
from everos_reflect.typed_numbers import whole_value_problem

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

MODES = ("hybrid", "vector", "keyword")
#: The most hits one search returns, everywhere: CLI `--top-k`, API and MCP `top_k`.
MAX_TOP_K = 100
RRF_K = 60  # the usual RRF constant: damps the weight of the very first ranks
CANDIDATES_PER_HIT = 4  # each side of a hybrid search fetches this many candidates per hit
FACTS_PER_HIT = 3  # facts fetched per Episode candidate when ranking Episodes by passage
PASSAGES_PER_HIT = 3  # nearest facts a hit reports (and its snippet starts from)
#: Nearest facts kept per entry to open its further passages on (best first).
ANCHORS_PER_HIT = 8
#: Items one entry may fill in a result: its best passage and up to this minus one more.
PASSAGES_PER_ENTRY = 3
#: The most a caller of the API, MCP or CLI may ask for (``passages_per_entry`` 1..this): the
#: default is already the most an entry serves, so more would only let one entry crowd a
#: small ``top_k``; 1 is one item per entry (no repeated ids).
MAX_PASSAGES_PER_ENTRY = PASSAGES_PER_ENTRY


@dataclass
class SearchHit:
    """One result, with the fields of SPEC §7 (``episode`` is the entry's text)."""

    id: str
    subject: str
    episode: str
    session_id: str | None
    timestamp: str | None
    parent_type: str | None
    parent_id: str | None
    score: float
    user_id: str
    app_id: str
    project_id: str
    deprecated_by: str | None = None
    sources: list[str] = field(default_factory=list)
    #: The passage of ``episode`` that answers the query, and the day it was said.
    snippet: str = ""
    snippet_date: str | None = None
    #: The entry's kind (``episode``, ``atomic_fact``, ``insight`` ...), SPEC §10.
    kind: str = "episode"
    #: A derived record's ``status`` (``active``, ``stale`` ...); None for Episodes and facts.
    status: str | None = None
    #: The entry's atomic facts nearest the query, best first (hybrid search of Episodes):
    #: why it matched, and the sentences its ``snippet`` starts from.
    passages: list[str] = field(default_factory=list)
    #: Which passage of the entry this item is: 0 its best, 1.. further ones (same ``id``).
    passage: int = 0
    #: Indices of the snippet's sentences in the entry's text (``dated_sentences`` order).
    snippet_sentences: tuple[int, ...] = field(default=(), repr=False)
    #: Further passages not yet placed: (snippet, sentence indices, share of the score).
    more: list[tuple[str, str | None, tuple[int, ...], str, float]] = field(
        default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The hit as the API and ``--json`` show it (SPEC §7 fields and ours, no internals)."""
        data = asdict(self)
        for internal in ("snippet_sentences", "more"):
            data.pop(internal)
        return data


def _with_snippets(hits: list[SearchHit], query: str,
                   passages: Mapping[tuple[str, str, str, str],
                                     list[tuple[str, int]]] | None = None,
                   per_entry: int = 1) -> list[SearchHit]:
    """Each hit's snippet from its nearest facts (``passages``: entry → (fact text, rank in the
    fact search), best first), and up to ``per_entry - 1`` further passages with their share
    of its score."""
    for hit in hits:
        anchors = list((passages or {}).get((hit.app_id, hit.project_id, hit.user_id, hit.id),
                                            ()))
        hit.passages = [text for text, _ in anchors[:PASSAGES_PER_HIT]]
        found, more = make_passages(hit.episode or hit.subject, query,
                                    date=(hit.timestamp or "")[:10] or None,
                                    anchors=[text for text, _ in anchors],
                                    snippet_anchors=PASSAGES_PER_HIT,
                                    limit=per_entry)
        hit.snippet, hit.snippet_date = found.text, found.date
        hit.snippet_sentences = found.sentences
        best = anchors[0][1] if anchors else 0
        hit.more = [(p.snippet.text, p.snippet.date, p.snippet.sentences, anchors[p.anchor][0],
                     (RRF_K + best) / (RRF_K + anchors[p.anchor][1])) for p in more]
    return hits


def with_passages(hits: Sequence[SearchHit], per_entry: int) -> list[SearchHit]:
    """``hits`` (best first) with up to ``per_entry - 1`` further passages of each entry as
    items of their own, placed by score (an entry's score × its passage's share, always below
    the entry's own item); ties keep the entries first. ``per_entry`` 1: the hits as they are.
    """
    items = list(hits)
    if per_entry > 1:
        for hit in hits:
            for n, (text, day, sentences, anchor, share) in enumerate(
                    hit.more[:per_entry - 1], start=1):
                items.append(replace(hit, score=round(hit.score * share, 6), snippet=text,
                                     snippet_date=day, snippet_sentences=sentences,
                                     passages=[anchor], passage=n, more=[]))
        items.sort(key=lambda h: -h.score)  # stable: entries keep their order on ties
    for item in items:
        item.more = []
    return items


def _hit(row: dict[str, Any], score: float) -> SearchHit:
    return SearchHit(
        id=row["id"],
        subject=row.get("subject") or "",
        episode=row.get("text") or "",
        session_id=row.get("session_id"),
        timestamp=row.get("timestamp"),
        parent_type=row.get("parent_type"),
        parent_id=row.get("parent_id"),
        score=round(float(score), 6),
        user_id=row["user_id"],
        app_id=row["app_id"],
        project_id=row["project_id"],
        deprecated_by=row.get("deprecated_by"),
        sources=list(row.get("sources") or []),
        kind=str(row.get("kind") or "episode"),
    )


def _row_key(row: dict[str, Any]) -> tuple[str, str, str, str]:
    return (row["app_id"], row["project_id"], row["user_id"], row["id"])


def cosine_score(distance: float) -> float:
    """LanceDB's cosine distance (1 - cos) as a similarity clipped to 0..1."""
    return min(1.0, max(0.0, 1.0 - float(distance)))


def bm25_score(score: float) -> float:
    """A BM25 score squashed monotonically into 0..1 (independent of the other hits)."""
    score = max(0.0, float(score))
    return score / (score + 1.0)


def rrf_fuse(
    rankings: Sequence[Sequence[dict[str, Any]]], *, top_k: int, k: int = RRF_K
) -> list[tuple[dict[str, Any], float]]:
    """Reciprocal-rank fusion of ranked row lists, each row scored by ``sum 1 / (k + rank)``.

    The score is divided by its maximum (first in every list), so it lies in 0..1. Ties keep
    the order of first appearance (the vector list's, when it comes first).
    """
    fused: dict[tuple[str, str, str, str], list[Any]] = {}
    for ranking in rankings:
        for rank, row in enumerate(ranking, start=1):
            slot = fused.setdefault(_row_key(row), [row, 0.0, len(fused)])
            slot[1] += 1.0 / (k + rank)
    best = len(rankings) / (k + 1)
    ordered = sorted(fused.values(), key=lambda slot: (-slot[1], slot[2]))
    return [(row, score / best) for row, score, _ in ordered[:top_k]]


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="everos-search")
        return _POOL



#: The statuses a search serves by default, per kind: SPEC §7 leaves out only deprecated and
#: stale entries; a retired record or a resolved relation is closed, and a lesson two tasks
#: disagree on (``contested``) is served as the briefing and ``lessons`` serve it.
_ACTIVE = frozenset({"active"})
_SERVED = {Kind.LESSON.value: frozenset(LIVE_STATUSES)}


def search(
    runtime: Runtime,
    query: str,
    *,
    top_k: int = 5,
    user_id: str | None = None,
    app_id: str | None = None,
    project_id: str | None = None,
    mode: str | None = None,
    include_deprecated: bool = False,
    kind: Kind | str = Kind.EPISODE,
    kinds: Sequence[Kind | str] | None = None,
    include_stale: bool = False,
    latest_first_order: bool = True,
    passages_per_entry: int = PASSAGES_PER_ENTRY,
) -> list[SearchHit]:
    """Search one kind (``kind``) or several (``kinds``, merged by score; SPEC §10); filters
    left as ``None`` match every tenant or user.

    Every hit carries its full text (``episode``) and a ``snippet``: the passage that answers
    the query, with its date (see :mod:`everos_reflect.index.snippet`). Scores lie in 0..1,
    higher is better: cosine similarity (vector), squashed BM25 (keyword), normalised RRF
    (hybrid). A later version of a hit ranks above it (:mod:`everos_reflect.index.recency`:
    by their stored vectors, or by their words as the offline merge reads versions) unless
    ``latest_first_order`` is off, which gives the plain ranked order. A hybrid search of
    Episodes may return up to ``passages_per_entry`` passages of one entry as separate items
    (same ``id``, ``passage`` 0, 1 ...; see the module docstring); ``top_k`` counts items.

    Deprecated (merged-away) entries are left out unless ``include_deprecated``. Derived
    records (insights, convictions, ...) carry their ``status``; stale and retired ones are
    left out unless ``include_stale``. The status is read from the record's Markdown, the
    truth.
    """
    if not isinstance(query, str):
        raise InvalidSearch(f"query: must be a string, got {json_got(query)}")
    if blank(query):  # U+200B alone is no query either
        raise InvalidSearch(f"query: {must_not_be_empty()}")
    if (problem := surrogate_problem(query) or query_control_problem(query)) is not None:
        raise InvalidSearch(f"query: {problem}")  # an undecodable CLI argument, a NUL
    if (problem := query_length_problem(query, MAX_QUERY_CHARS)) is not None:
        raise InvalidSearch(problem)
    # in the words of the API's schema and the CLI's options (--top-k, --mode, --kind): the
    # library said "top_k must be an integer from 1 to 100" and "unknown search mode 'x'"
    if (problem := whole_value_problem(top_k, 1, MAX_TOP_K)) is not None:
        raise InvalidSearch(f"top_k: {problem}")
    # the edges cap it too; a library caller's 1000 let one entry fill every item of a result
    if (problem := whole_value_problem(passages_per_entry, 1, MAX_PASSAGES_PER_ENTRY)) \
            is not None:
        raise InvalidSearch(f"passages_per_entry: {problem}")
    if mode is None:
        mode = runtime.settings.index.search_mode  # checked when the settings were read
    elif mode not in MODES:  # "" too, said to be empty; "HYBRID" is refused as the API does
        raise InvalidSearch(f"mode: {one_of(MODES, mode)}")
    if kinds is not None and not kinds:  # as the API's "kinds": [] is refused: it searched
        raise InvalidSearch(f"kinds: {must_not_be_empty()}")  # episodes, as if none was given
    wanted = _kinds(kinds, "kinds") if kinds else _kinds([kind], "kind")
    where = where_clause(app_id=app_id, project_id=project_id, user_id=user_id,
                         include_deprecated=include_deprecated)
    # one query vector for every kind searched (the local model takes ~40 ms per query)
    vector = None if mode == "keyword" else embed_query(runtime.embedder, query)
    hits: list[SearchHit] = []
    vectors: dict[tuple[str, str, str, str, str], Any] = {}
    for k in wanted:
        fetch = top_k if not k.derived or include_stale else min(MAX_TOP_K, top_k * 3)
        found = _search_kind(runtime, k, query, vector, mode=mode, top_k=fetch, where=where,
                             include_deprecated=include_deprecated,
                             vectors=None if k.derived else vectors,
                             per_entry=passages_per_entry)
        if k.derived:
            found = _with_status(runtime, found, include_stale)
        hits += found
    if len(wanted) > 1:
        hits.sort(key=lambda h: (-h.score, h.kind, h.id))
    if latest_first_order:  # vectors came with the rows
        hits = latest_first(hits, vectors, threshold=RECENCY_COSINE,
                            texts={key(h): h.episode for h in hits})
    return with_passages(hits, passages_per_entry)[:top_k]


def _kinds(values: Sequence[Kind | str], field: str) -> list[Kind]:
    """``values`` as kinds, each once; one that is none is refused naming ``field`` (``kind``
    or ``kinds``) in the words of the API's ``kinds`` and the CLI's ``--kind``."""
    out: list[Kind] = []
    for value in values:
        try:
            k = Kind(value)
        except ValueError:
            raise InvalidSearch(f"{field}: {one_of([k.value for k in Kind], value)}") from None
        if k not in out:
            out.append(k)
    return out


def _with_status(runtime: Runtime, hits: list[SearchHit], include_stale: bool) -> list[SearchHit]:
    """Each derived hit's ``status`` from its Markdown; inactive ones dropped unless asked.

    The hits of one user are read together, each log parsed once: read one by one, each hit
    parsed its whole log again (100 insights of one 1.4 MB day log: 5 s per search)."""
    by_user: dict[UserRef, list[str]] = {}
    for hit in hits:
        by_user.setdefault(UserRef(hit.app_id, hit.project_id, hit.user_id), []).append(hit.id)
    found: dict[tuple[UserRef, str], Any] = {}
    for ref, ids in by_user.items():
        try:
            entries = runtime.store.get_many(ref, ids)
        except (EverosError, OSError):  # e.g. a log that is no file: each hit on its own
            entries = {}
            for entry_id in ids:
                try:
                    entries[entry_id] = runtime.store.get(ref, entry_id)
                except (EverosError, OSError):
                    continue
        found.update({(ref, i): e for i, e in entries.items()})
    kept = []
    rivals_read: dict[UserRef, dict[str, str]] = {}
    for hit in hits:
        ref = UserRef(hit.app_id, hit.project_id, hit.user_id)
        entry = found.get((ref, hit.id))
        if entry is None:
            continue  # gone since it was indexed
        # as the briefing serves it: `status: Active` was left out of a search as stale
        hit.status = (lesson_status(entry.id, entry.meta) if entry.kind is Kind.LESSON
                      else served_status(entry.meta))  # a lesson naming no rival: active
        if entry.kind is Kind.LESSON and rivals_decide(entry.id, entry.meta):
            # its rivals as `lessons` and the briefing read them: a task id or a lesson
            # deleted or retired by hand is no rival (searched, it was served as contested)
            if ref not in rivals_read:
                rivals_read[ref] = served_statuses(runtime.store, ref)
            hit.status = rivals_read[ref].get(hit.id, hit.status)
        if include_stale or hit.status in _SERVED.get(hit.kind, _ACTIVE):
            kept.append(hit)
    return kept


def _search_kind(
    runtime: Runtime,
    kind: Kind,
    query: str,
    vector: np.ndarray | None,
    *,
    mode: str,
    top_k: int,
    where: str | None,
    include_deprecated: bool,
    vectors: dict[tuple[str, str, str, str, str], Any] | None,
    per_entry: int = 1,
) -> list[SearchHit]:
    """One kind of entry, arguments checked by :func:`search` (``vector`` embeds ``query``;
    None in keyword mode); hybrid Episode hits get up to ``per_entry`` passages.

    ``vectors``, when given, receives the stored vector of every hit the vector side found,
    keyed by :func:`everos_reflect.index.recency.key` (keyword mode finds none).
    """
    index = runtime.vectors

    if mode == "keyword":
        rows = index.search_text(kind, query, k=top_k, where=where)
        return _with_snippets([_hit(r, bm25_score(r["_score"])) for r in rows], query)

    if vector is None:
        raise ValueError(f"{mode} search needs the query's vector")
    with_vectors = vectors is not None
    if mode == "vector":
        rows = index.search_vector(kind, vector, k=top_k, where=where, with_vectors=with_vectors)
        hits = [_hit(r, cosine_score(r["_distance"])) for r in rows]
        _keep_vectors(rows, hits, vectors)
        return _with_snippets(hits, query)

    depth = max(top_k * CANDIDATES_PER_HIT, 20)
    # both searches at once: LanceDB releases the GIL, so on 2+ cores they overlap
    text_future = _pool().submit(index.search_text, kind, query, k=depth, where=where)
    facts_future = (_pool().submit(index.search_vector, Kind.ATOMIC_FACT, vector,
                                   k=depth * FACTS_PER_HIT, where=where)
                    if kind is Kind.EPISODE else None)
    by_vector = index.search_vector(kind, vector, k=depth, where=where,
                                    with_vectors=with_vectors)
    rankings = [by_vector, text_future.result()]
    passages: dict[tuple[str, str, str, str], list[tuple[str, int]]] = {}
    if facts_future is not None:
        facts = facts_future.result()
        passages = _passages(facts)
        order = _passage_order(index, facts, passages, by_vector, where=where,
                               by_text=rankings[1])
        rankings.append(_by_passage(index, order, rankings, depth=depth,
                                    include_deprecated=include_deprecated,
                                    with_vectors=with_vectors))
    fused = rrf_fuse(rankings, top_k=top_k)
    hits = [_hit(row, score) for row, score in fused]
    _keep_vectors(by_vector + rankings[-1], hits, vectors)
    return _with_snippets(hits, query, passages, per_entry)


def _passage_order(index: Any, facts: Sequence[dict[str, Any]],
                   passages: Mapping[tuple[str, str, str, str], list[tuple[str, int]]],
                   by_vector: Sequence[dict[str, Any]], *, where: str | None,
                   by_text: Sequence[dict[str, Any]] = ()) -> list[tuple[str, str, str, str]]:
    """The Episodes of the by-passage ranking, nearest passage first: each parent of the
    nearest ``facts`` at its best fact's distance, and each candidate of the vector search
    (``by_vector``) that has no atomic fact at all at its own distance -- its whole text is
    its one passage (a short ``add``ed Episode before a Reflection run extracts facts for it).
    A fact-less candidate of the keyword search alone (``by_text``: a name, a rare word, and
    not among the vector candidates) has its passage placed where that search placed it.

    Left out of this list, a fact-less Episode could be ranked by two lists only, and lost to
    any narrative with facts (found 1st by vector and keyword: 2/61, below 5th/5th/1st: 3/65);
    found by keyword alone, by one list: first by keyword, it lost to any entry two lists
    ranked anywhere in their first 60 (searched by its three rarest words among 544 LoCoMo
    Episodes, 20 of 61 fact-less ones were in no top 5, 11 in no top 20). A candidate with no
    fact among the nearest may still have facts, farther off: one query asks which have any
    (:meth:`VectorIndex.parents_with_rows`); those keep out of the list, as before. Both
    distances are LanceDB's cosine distance, so they rank on one scale.
    """
    best: dict[tuple[str, str, str, str], float] = {}
    for fact in facts:  # nearest first
        parent = (fact["app_id"], fact["project_id"], fact["user_id"], fact.get("parent_id"))
        if fact.get("parent_type") == "episode" and parent in passages and parent not in best:
            best[parent] = float(fact["_distance"])
    near = {_row_key(row) for row in by_vector}
    unseen = [k for k in dict.fromkeys([*near, *map(_row_key, by_text)]) if k not in passages]
    with_facts = index.parents_with_rows(Kind.ATOMIC_FACT, unseen, where=where) \
        if unseen else set()
    for row in by_vector:
        k = _row_key(row)
        if k not in passages and k not in with_facts:
            best.setdefault(k, float(row["_distance"]))
    order = sorted(best, key=best.__getitem__)  # stable: fact parents first on ties
    for rank, row in enumerate(by_text):
        k = _row_key(row)
        if k not in near and k not in passages and k not in with_facts:
            order.insert(min(rank, len(order)), k)
    return order


def _by_passage(index: Any, order: Sequence[tuple[str, str, str, str]],
                rankings: Sequence[Sequence[dict[str, Any]]], *, depth: int,
                include_deprecated: bool, with_vectors: bool) -> list[dict[str, Any]]:
    """Episodes ranked by their best-matching passage (``order``, nearest first; see
    :func:`_passage_order`): their nearest atomic fact, or a fact-less Episode's own text.

    One vector per Episode dilutes a long narrative: a question about one of its paragraphs
    matches the whole text weakly. Its facts are sentence-sized, so the nearest facts point
    at the passage that answers, and each fact's parent Episode takes the rank of its best
    fact. Fused as a third list, this lifts an entry that holds the answer somewhere inside
    without letting length alone win (a long entry still gets one rank, not one per fact).
    """
    order = list(order)[:depth]
    known = {_row_key(row): row for ranking in rankings for row in ranking}
    missing = [k for k in order if k not in known or (with_vectors and "vector" not in known[k])]
    for row in index.rows_by_keys(Kind.EPISODE, missing, with_vectors=with_vectors):
        known[_row_key(row)] = row
    return [known[k] for k in order
            if k in known and (include_deprecated or known[k].get("deprecated_by") is None)]


def _passages(facts: Sequence[dict[str, Any]],
              ) -> dict[tuple[str, str, str, str], list[tuple[str, int]]]:
    """Each parent Episode of ``facts`` (nearest first), in the order of its best fact, with
    its nearest facts' texts and ranks (1 = nearest of all), at most :data:`ANCHORS_PER_HIT`."""
    out: dict[tuple[str, str, str, str], list[tuple[str, int]]] = {}
    for rank, fact in enumerate(facts, start=1):
        if fact.get("parent_type") == "episode" and fact.get("parent_id"):
            mine = out.setdefault((fact["app_id"], fact["project_id"], fact["user_id"],
                                   fact["parent_id"]), [])
            if fact.get("text") and len(mine) < ANCHORS_PER_HIT:
                mine.append((fact["text"], rank))
    return out


def _keep_vectors(rows: Sequence[dict[str, Any]], hits: Sequence[SearchHit],
                  out: dict[tuple[str, str, str, str, str], Any] | None) -> None:
    """Put the vectors of the rows that became hits into ``out``."""
    if out is None:
        return
    wanted = {key(h) for h in hits}
    for row in rows:
        k = (row["app_id"], row["project_id"], row["user_id"],
             str(row.get("kind") or "episode"), row["id"])
        if k in wanted and row.get("vector") is not None:
            v = np.asarray(row["vector"], dtype=np.float32)
            norm = float(np.linalg.norm(v))
            if norm > 0:
                out[k] = v / norm
