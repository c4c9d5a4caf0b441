"""Online clustering cost, side by side with EverAlgo's ``cluster_by_geometry`` in one process.

Streams (vectors from the bundled MiniLM, the same vectors for both sides):

- **LoCoMo**: the 544 Episodes of ``locomo_episodes.py`` (one per session and speaker; each
  speaker is one owner), in time order.
- **one owner ×N**: the anchor's heavy-user stream (``../shared/anchors``): the LoCoMo stream
  repeated N times under one owner, each repeat 400 days later, vectors jittered (σ 0.02),
  delivered in time order (LoCoMo spans more than 400 days, so repeats interleave).

Our side runs ``ClusterService`` on a real ``system.db`` (state persisted): once with one
transaction per Episode (``assign``, a watcher syncing one file) and once as an index flush
does it, ``on_entries_indexed`` per owner inside one ``ClusterService.batch()`` of 256
Episodes. Times are CPU time of this process (``time.process_time``), both sides, so that a
machine shared with other work still gives comparable figures. EverAlgo runs
``cluster_by_geometry`` on in-memory pydantic clusters with the same threshold and window; it
has no consolidation, so ours never rejoins here either. Both clusterings are compared with the
adjusted Rand index (scikit-learn). ``--consolidate`` adds a run where every eligible cluster
is consolidated every 30 days of stream time, to show that the consolidated candidates stay
bounded.

EverAlgo is loaded from its unpacked wheel, never installed:

    pip download --no-deps --python-version 3.12 --only-binary=:all: -d ea \
        everalgo-clustering==0.2.1
    python -m zipfile -e ea/everalgo_clustering-0.2.1-py3-none-any.whl ea/site
    python bench/bench_clustering.py LOCOMO_JSON --everalgo ea/site [--scales 20 100 184]

``--rule-only N`` times the rule in memory alone (``assign_run`` per run with the join of a
fact's newer version, as the service asks it; nothing persisted), N times per stream: the
figure a change to the rule moves, without SQLite's noise.
``--persisted-only N`` times ours alone, persisted, 256 per transaction, N times per stream
(least, median, each run, and the clusters' digest): two trees compared in one job.
``--distinct-texts``: the one-owner streams' copies each with texts of their own (the plain
repeats say every LoCoMo text 20 or 184 times, so what is kept per text stays warm).
``--consolidated-only N``: the same with every eligible cluster consolidated every
``--consolidate-days`` of stream time (the consolidated row), with its digest and tenths.
``--flush``: every batch of 256 placed as the watcher's flush places it
(``on_entries_indexed_many``, one batch per daily log, in path order; ``wiring.py``), not
``on_entries_indexed`` once per owner.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.util
import re
import sqlite3
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import adjusted_rand_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo_episodes as lm

from everos_reflect.clustering.matrix import ClusterRow, UserClusters
from everos_reflect.clustering.online import VERSION_FLOOR, Decision, normalize, normalize_rows
from everos_reflect.clustering.service import (
    ClusterService,
    _holds_earlier_version,
    _VersionReads,
)
from everos_reflect.index import db as dbmod
from everos_reflect.llm.extractive import tells_change
from everos_reflect.model import Entry, Kind, UserRef, format_timestamp
from everos_reflect.settings import Settings

DAY = 86400.0
BATCH = 256


@dataclass(frozen=True)
class Item:
    owner: str
    eid: str
    ts: float  # epoch seconds
    vector: np.ndarray
    #: the Episode's text: placing one reads it (whether it tells a change of a fact, which
    #: may join it to that fact's cluster under the threshold), so the cost is measured on
    #: what a person wrote, not on a stand-in
    text: str = ""


# --------------------------------------------------------------------------- streams


def locomo_stream(path: str, cache: Path | None = None) -> tuple[list[Item], np.ndarray]:
    """LoCoMo Episodes in time order with their MiniLM vectors (read from ``cache`` when it
    exists, written there otherwise: embedding is the slow part on a loaded machine)."""
    from everos_reflect.embedding import make_embedder

    eps = lm.episodes(lm.load(path))
    eps.sort(key=lambda e: (e.timestamp, e.user_id, e.session))
    if cache is not None and cache.exists():
        vectors = np.load(cache)
    else:
        embedder = make_embedder(Settings().embedding)
        vectors = np.asarray(embedder.embed([e.text for e in eps]), dtype=np.float32)
        if cache is not None:
            np.save(cache, vectors)
    if len(vectors) != len(eps):
        raise SystemExit(f"{cache} holds {len(vectors)} vectors for {len(eps)} Episodes")
    items = [Item(e.user_id, f"ep_{n:07d}", e.timestamp.timestamp(), vectors[n], e.text)
             for n, e in enumerate(eps)]
    return items, vectors


#: where a sentence ends (its closing mark, then a space or the end): what
#: :func:`distinct_text` weaves a copy's word in before
_SENTENCE_END = re.compile(r"([.!?])(?=\s|$)")


def copy_word(copy: int) -> str:
    """An invented lowercase word naming ``copy`` (1 → ``qxb``, 26 → ``qxba``): no name, no
    number, no word any reading of a change looks for."""
    letters = ""
    while True:
        copy, digit = divmod(copy, 26)
        letters = chr(ord("a") + digit) + letters
        if not copy:
            return "qx" + letters


def distinct_text(text: str, copy: int) -> str:
    """``text`` as copy ``copy`` of a repeated stream says it (``--distinct-texts``): copy 0
    unchanged, every later copy with its :func:`copy_word` before each sentence's closing
    mark (and at the end of a text that ends without one), so no text and no sentence of
    one copy comes again in another: what is read per text and per sentence (the reading
    of a change, the version join's sentence readings, kept per text) is read anew for
    each, as a real owner's new texts are, where the plain repeats read every text 20
    times."""
    if copy == 0:
        return text
    word = copy_word(copy)
    woven = _SENTENCE_END.sub(rf" {word}\1", text).rstrip()
    return woven if woven.endswith((".", "!", "?")) else f"{woven} {word}"


def one_owner_stream(base: list[Item], scale: int, seed: int = 0,
                     distinct: bool = False) -> list[Item]:
    """The anchor's heavy user: ``base`` repeated ``scale`` times, 400 days apart, jittered.
    ``distinct``: each copy's texts made its own (:func:`distinct_text`); the vectors are
    the same either way (no embedding: the jittered copies of the LoCoMo vectors)."""
    rng = np.random.default_rng(seed)
    n = len(base) * scale
    idx = np.arange(n) % len(base)
    vecs = np.stack([b.vector for b in base])[idx]
    vecs = vecs + rng.normal(0, 0.02, vecs.shape).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    when = [base[i % len(base)].ts + (i // len(base)) * 400 * DAY for i in range(n)]
    # LoCoMo spans more than 400 days, so repeats overlap: deliver in time order (ids follow)
    order = sorted(range(n), key=lambda i: (when[i], i))
    texts = [b.text for b in base]
    return [Item("one", f"ep_{k:07d}", when[i], vecs[i],
                 distinct_text(texts[i % len(base)], i // len(base)) if distinct
                 else texts[i % len(base)])
            for k, i in enumerate(order)]


# --------------------------------------------------------------------------- EverAlgo


def load_everalgo(site: Path) -> tuple[Any, Callable[..., Any]]:
    """``Cluster`` and ``cluster_by_geometry`` from the unpacked wheel; the LLM helpers it
    imports (Python ≥ 3.12 only) are stubbed, as ``../shared/anchors`` does."""
    sys.path.insert(0, str(site))
    for name in ["everalgo.llm", "everalgo.llm.types", "everalgo.llm.protocols",
                 "everalgo.prompts"]:
        sys.modules[name] = types.ModuleType(name)
    sys.modules["everalgo.llm.types"].ChatMessage = object  # type: ignore[attr-defined]
    sys.modules["everalgo.prompts"].render_prompt = lambda *a, **k: ""  # type: ignore[attr-defined]
    base = site / "everalgo" / "clustering"

    def load(name: str, file: str) -> Any:
        spec = importlib.util.spec_from_file_location(name, base / file)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        return module

    state = load("ea_state", "state.py")
    sys.modules["everalgo.clustering.state"] = state
    sys.modules["everalgo.clustering.prompts.en.cluster"] = types.SimpleNamespace(
        CLUSTER_LLM_ASSIGN_PROMPT="")
    alg = load("ea_alg", "algorithm.py")
    state.Cluster.model_rebuild(_types_namespace={"np": np})
    return state.Cluster, alg.cluster_by_geometry


def run_everalgo(ea: tuple[Any, Callable[..., Any]], items: Sequence[Item], threshold: float,
                 window_days: float) -> tuple[float, list[str]]:
    """CPU seconds for the whole stream and the cluster label of each item."""
    cluster_cls, by_geometry = ea
    per_owner: dict[str, list[Any]] = {}
    labels: list[str] = []
    t0 = time.process_time()
    for it in items:
        owned = per_owner.setdefault(it.owner, [])
        new = cluster_cls(centroid=it.vector, last_ts=int(it.ts * 1000), members=[it.eid])
        merged = by_geometry(new, owned, threshold=threshold, time_window_days=window_days)
        if merged is None:
            cid = f"{it.owner}/c{len(owned)}"
            owned.append(new.model_copy(update={"id": cid}))
        else:
            k = next(i for i, c in enumerate(owned) if c.id == merged.id)
            owned[k] = merged
            cid = merged.id
        labels.append(cid)
    return time.process_time() - t0, labels


# --------------------------------------------------------------------------- ours


class _Vectors:
    def __init__(self) -> None:
        self.data: dict[tuple[UserRef, str], np.ndarray] = {}

    def get_vectors(self, kind: Kind, ref: UserRef, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return {i: self.data[(ref, i)] for i in ids if (ref, i) in self.data}


#: ``PRAGMA`` statements run on ``system.db`` once it is opened (``--pragma``): settings of
#: :func:`everos_reflect.index.db.connect` measured in place, with nothing else changed
PRAGMAS: list[str] = []
#: ``--flush``: every batch placed as the watcher's flush places it
#: (``on_entries_indexed_many``: one ``(ref, entries, vectors)`` per daily log, in path
#: order), not ``on_entries_indexed`` once per owner
FLUSH = False


class _Runtime:
    """What ClusterService needs: settings, ``db()`` on a real system.db, stored vectors."""

    def __init__(self, root: Path, settings: Settings) -> None:
        self.root = root
        self.settings = settings
        self.vectors = _Vectors()
        self._conn: sqlite3.Connection | None = None

    def db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = dbmod.connect(self.root)
            for pragma in PRAGMAS:
                self._conn.execute(f"PRAGMA {pragma}").fetchall()
        return self._conn


def _entries(items: Sequence[Item]) -> dict[str, Entry]:
    """The Entry objects the indexer would hand over (built before any timing), with their
    timestamp and text hash read once, as the indexer reads them for the ``entries`` row
    before it publishes the change (code that memoises them then finds them computed)."""
    out = {}
    for it in items:
        when = datetime.fromtimestamp(it.ts, UTC)
        e = out[it.eid] = Entry(it.eid, Kind.EPISODE,
                                {"owner_id": it.owner, "timestamp": format_timestamp(when),
                                 "parent_type": "memcell"},
                                {"Subject": it.eid, "Content": it.text or f"episode {it.eid}"})
        _ = e.timestamp, e.text_hash
    return out


def _index_rows(conn: sqlite3.Connection, items: Sequence[Item], refs: dict[str, UserRef]
                ) -> None:
    """The ``entries`` rows the indexer writes before it hands a batch to the clustering,
    all before timing: the join of a fact's newer version reads cluster members' texts
    there, as in the daemon."""
    with conn:
        conn.executemany(
            "INSERT INTO entries (app_id, project_id, user_id, id, kind, path, owner_id, ts, "
            "text, parent_type, content_hash, text_hash) "
            "VALUES (?, ?, ?, ?, 'episode', 'bench.md', ?, ?, ?, 'memcell', '', '')",
            [(refs[it.owner].app, refs[it.owner].project, refs[it.owner].user_id, it.eid,
              it.owner, it.ts, it.text or f"episode {it.eid}") for it in items])


def cluster_digest(conn: sqlite3.Connection) -> str:
    """The first 16 hex of a SHA-256 over every ``clusters`` row (id, owner, centroid bytes,
    norm, count, span, narrative) and ``cluster_members`` row (owner, Episode, cluster, time,
    similarity, deprecation), floats by ``repr``: equal digests, byte-identical clusters.
    Keys, text hashes (the bench's ``entries`` rows carry none) and wall-clock columns are
    left out, so a stream and its ``recluster`` compare."""
    h = hashlib.sha256()
    for r in conn.execute(
            "SELECT cluster_id, app_id, project_id, user_id, centroid, centroid_norm, "
            "member_count, first_ts, last_ts, consolidated_entry_id FROM clusters "
            "ORDER BY app_id, project_id, user_id, cluster_id"):
        h.update(repr((*r[:4], bytes(r[4]).hex(), *map(repr, r[5:]))).encode())
    for r in conn.execute(
            "SELECT app_id, project_id, user_id, entry_id, cluster_id, ts, similarity, "
            "deprecated_by FROM cluster_members ORDER BY app_id, project_id, user_id, entry_id"):
        h.update(repr((*r[:5], repr(r[5]), repr(r[6]), r[7])).encode())
    return h.hexdigest()[:16]


def by_owner_of(chunk: Sequence[Item]) -> dict[str, list[Item]]:
    """``chunk``'s items per owner, in stream order (grouped before the clock starts)."""
    by_owner: dict[str, list[Item]] = {}
    for it in chunk:
        by_owner.setdefault(it.owner, []).append(it)
    return by_owner


def flush_of(chunk: Sequence[Item], refs: dict[str, UserRef], entries: dict[str, Entry]
             ) -> list[tuple[UserRef, list[Entry], dict[str, np.ndarray]]]:
    """What the watcher's flush hands ``on_entries_indexed_many`` for ``chunk``: one
    ``(ref, entries, vectors)`` per daily log (owner and UTC day), in path order (owner, then
    day: a sync takes its changed files sorted by path), each file's Episodes in stream
    order. Built before the clock starts, as the indexer builds its change sets before the
    clustering is called."""
    files: dict[tuple[str, str], list[Item]] = {}
    for it in chunk:
        day = datetime.fromtimestamp(it.ts, UTC).date().isoformat()
        files.setdefault((it.owner, day), []).append(it)
    return [(refs[owner], [entries[i.eid] for i in files[owner, day]],
             {i.eid: i.vector for i in files[owner, day]}) for owner, day in sorted(files)]


def place_chunk(svc: ClusterService, chunk: Sequence[Item], by_owner: dict[str, list[Item]],
                refs: dict[str, UserRef], entries: dict[str, Entry], *, lone: bool,
                flush: Sequence[tuple[UserRef, list[Entry], dict[str, np.ndarray]]] | None
                = None) -> None:
    """Place one chunk as the daemon does: ``lone``, its one item in a transaction of its
    own (``assign``); ``flush`` (:func:`flush_of`), the chunk as the watcher's flush hands
    it over (``on_entries_indexed_many``, one batch per daily log, which merges one owner's
    consecutive logs; ``wiring.py``); else the chunk in one batch, each owner's items
    together (``on_entries_indexed`` per owner)."""
    if lone:
        it = chunk[0]
        svc.assign(refs[it.owner], it.eid, it.vector, it.ts)
        return
    if flush is not None:
        with svc.batch():
            svc.on_entries_indexed_many(flush)
        return
    with svc.batch():
        for owner, owned in by_owner.items():
            svc.on_entries_indexed(refs[owner], [entries[i.eid] for i in owned],
                                   {i.eid: i.vector for i in owned})


def stream_runtime(root: Path, settings: Settings, items: Sequence[Item]
                   ) -> tuple[_Runtime, dict[str, UserRef]]:
    """A fake runtime at ``root`` with ``items``' vectors stored (LanceDB in the daemon) and
    their ``entries`` rows written, all before timing, and each owner's ref."""
    rt = _Runtime(root, settings)
    rt.db()  # open and migrate system.db before timing: a daemon holds it open
    # in sorted order: the consolidating walks the owners in it and numbers its narratives
    # by it (a set's order changes with the process's string hashes)
    refs = {o: UserRef.of(o) for o in sorted({it.owner for it in items})}
    for it in items:
        rt.vectors.data[(refs[it.owner], it.eid)] = it.vector
    _index_rows(rt.db(), items, refs)
    return rt, refs


def run_ours(items: Sequence[Item], settings: Settings, batch: int,
             consolidate_days: float = 0.0, digest: bool = False) -> dict[str, Any]:
    """CPU seconds per assignment (a batch's time spread over its items), labels, counts.

    ``batch`` 1: ``assign`` in its own transaction (a watcher syncing one file). Larger: what
    an index flush does, ``on_entries_indexed`` per owner inside one ``batch()``.
    ``digest``: also :func:`cluster_digest` after the stream and after ``recluster``."""
    entries = _entries(items) if batch > 1 else {}
    with tempfile.TemporaryDirectory() as tmp:
        rt, refs = stream_runtime(Path(tmp), settings, items)
        svc = ClusterService(rt)  # type: ignore[arg-type]
        per_item: list[float] = []
        consolidations = 0
        next_consolidation = items[0].ts + consolidate_days * DAY if items else 0.0
        seq = 0
        with _harness_out_of_gc():
            for start in range(0, len(items), batch):
                chunk = items[start:start + batch]
                if consolidate_days and chunk[0].ts >= next_consolidation:
                    consolidations += _consolidate_all(svc, rt, refs.values(), seq)
                    seq += 1
                    next_consolidation = chunk[0].ts + consolidate_days * DAY
                by_owner = by_owner_of(chunk)
                flush = flush_of(chunk, refs, entries) if FLUSH and batch > 1 else None
                t0 = time.process_time()
                place_chunk(svc, chunk, by_owner, refs, entries, lone=batch == 1,
                            flush=flush)
                per_item += [(time.process_time() - t0) / len(chunk)] * len(chunk)
        conn = rt.db()
        final = {r[0]: r[1] for r in conn.execute(
            "SELECT entry_id, cluster_id FROM cluster_members")}
        clusters = conn.execute("SELECT COUNT(*) FROM clusters").fetchone()[0]
        consolidated = conn.execute(
            "SELECT COUNT(*) FROM clusters WHERE consolidated_entry_id IS NOT NULL").fetchone()[0]
        digests: dict[str, str] = {}
        if digest:
            digests["stream"] = cluster_digest(conn)
            svc.recluster()
            digests["recluster"] = cluster_digest(conn)
        return {"per_item": per_item, "labels": [final.get(it.eid, "") for it in items],
                "clusters": clusters, "consolidated": consolidated,
                "consolidations": consolidations, "digests": digests}


@contextmanager
def _harness_out_of_gc() -> Iterator[None]:
    """Keep the harness's own objects (the stream's Items and pre-built Entries, the vector
    store: some 500k objects at 100k Episodes) out of the garbage collector while timing: a full
    collection scanning them, triggered at random inside a batch, is the benchmark's cost, not
    the clustering's. Objects made while timing are collected as usual."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _out_of_gc(fn: Callable[..., Any], *args: Any) -> Any:
    with _harness_out_of_gc():
        return fn(*args)


def run_memory_only(items: Sequence[Item], settings: Settings) -> tuple[float, list[str]]:
    """The same rule on :class:`UserClusters` alone (nothing persisted): CPU seconds, labels.
    The like-for-like figure against EverAlgo, which keeps its clusters in memory too."""
    cfg = settings.clustering
    window = cfg.time_window_days * DAY
    states: dict[str, UserClusters] = {}
    labels: list[str] = []
    t0 = time.process_time()
    for it in items:
        st = states.setdefault(it.owner, UserClusters())
        vec = normalize(it.vector)
        d = st.choose(vec, it.ts, threshold=cfg.threshold, window_seconds=window,
                      rejoin_threshold=cfg.rejoin_threshold)
        if d.cluster_id is None:
            row = ClusterRow.new(f"{it.owner}/{it.eid}", vec, it.ts)
        else:
            row = st.get(d.cluster_id)
            row.add(vec, it.ts)
        st.put(row)
        labels.append(row.cluster_id)
    return time.process_time() - t0, labels


def run_memory_runs(items: Sequence[Item], settings: Settings) -> tuple[float, list[str]]:
    """The batch path on :class:`UserClusters` alone: per chunk of ``BATCH`` and owner, one
    ``assign_run`` (what ``on_entries_indexed`` does before its writes), with the join of a
    fact's newer version the service asks inside the run (``version_of``: the word gate,
    then :meth:`UserClusters.choose_version` over the members' texts, here held in memory
    as ``recluster`` holds them, where the service reads them from SQLite), so the rule
    timed is the rule the service runs. CPU seconds, labels."""
    cfg = settings.clustering
    window = cfg.time_window_days * DAY
    states: dict[str, UserClusters] = {}
    #: per owner and cluster, its members' ``(epoch, id, text)`` (``_Rebuild.episodes``)
    members: dict[str, dict[str, list[tuple[float, str, str]]]] = {}
    labels: list[str] = []
    t0 = time.process_time()
    for start in range(0, len(items), BATCH):
        by_owner: dict[str, list[Item]] = {}
        for it in items[start:start + BATCH]:
            by_owner.setdefault(it.owner, []).append(it)
        placed: dict[str, str] = {}
        for owner, owned in by_owner.items():
            st = states.setdefault(owner, UserClusters())
            episodes = members.setdefault(owner, {})
            units = normalize_rows(np.stack([i.vector for i in owned]))
            kept = 0

            def keep(upto: int, done: Sequence[tuple[str, float | None, str]],
                     owned: list[Item] = owned, episodes: dict[str, Any] = episodes) -> None:
                nonlocal kept
                for i, (cid, _, _) in zip(owned[kept:upto], done[kept:upto], strict=True):
                    episodes.setdefault(cid, []).append((i.ts, i.eid, i.text))
                kept = max(kept, upto)

            def version_of(q: int, done: list[tuple[str, float | None, str]],
                           owned: list[Item] = owned, st: UserClusters = st,
                           units: np.ndarray = units,
                           episodes: dict[str, Any] = episodes) -> Decision | None:
                it = owned[q]
                if not tells_change(it.text):
                    return None
                keep(q, done)
                reads = _VersionReads()
                return st.choose_version(
                    units[q], it.ts, window_seconds=window, floor=VERSION_FLOOR,
                    holds_partner=lambda c: _holds_earlier_version(
                        episodes.get(c, ()), (it.ts, it.eid), it.text, window, reads))

            out = st.assign_run(
                units, [i.ts for i in owned],
                lambda q, owned=owned, owner=owner: f"{owner}/{owned[q].eid}",
                threshold=cfg.threshold, window_seconds=window,
                rejoin_threshold=cfg.rejoin_threshold,
                member_threshold=cfg.member_threshold, version_of=version_of,
                version_floor=VERSION_FLOOR)
            keep(len(owned), out)
            placed.update((i.eid, cid) for i, (cid, _, _) in zip(owned, out, strict=True))
        labels += [placed[it.eid] for it in items[start:start + BATCH]]
    return time.process_time() - t0, labels


def _consolidate_all(svc: ClusterService, rt: _Runtime, refs: Any, seq: int) -> int:
    """Mark every eligible cluster consolidated by a synthetic narrative (its centroid)."""
    done = 0
    for ref in refs:
        for info in svc.eligible_for_reflection(ref, 10**9):
            live = [m.entry_id for m in svc.members(info.cluster_id)]
            vecs = rt.vectors.get_vectors(Kind.EPISODE, ref, live)
            centre = np.mean(np.asarray(list(vecs.values())), axis=0)
            centre = (centre / np.linalg.norm(centre)).astype(np.float32)
            narrative = f"ep_n{seq:04d}_{done:06d}"
            rt.vectors.data[(ref, narrative)] = centre
            svc.mark_consolidated(info.cluster_id, narrative, centre, live)
            done += 1
    return done


# --------------------------------------------------------------------------- report


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:8.1f} CPU-µs"


def _deciles(per_item: Sequence[float]) -> str:
    n = len(per_item)
    parts = []
    for d in (0, 4, 9):
        lo, hi = n * d // 10, n * (d + 1) // 10
        parts.append(f"{d * 10}-{(d + 1) * 10}%: {statistics.mean(per_item[lo:hi]) * 1e6:.1f}")
    return "mean CPU-µs by position in stream " + ", ".join(parts)


def _median_run(runs: list[Any], key: Callable[[Any], float]) -> Any:
    """The run whose ``key`` is the median (the lower one for an even count)."""
    return sorted(runs, key=key)[(len(runs) - 1) // 2]


def report(name: str, items: list[Item], settings: Settings, ea: Any | None,
           consolidate_days: float, repeat: int = 1, digest: bool = False) -> None:
    """Every figure is the median of ``repeat`` runs of that side (a 544-Episode stream takes
    ~20 ms: one run alone swings by a third from one invocation to the next). ``digest``:
    print :func:`cluster_digest` of each way of placing the stream, and after ``recluster``
    (an untimed run of its own)."""
    cfg = settings.clustering
    print(f"\n== {name}: {len(items):,} Episodes, {len({i.owner for i in items})} owner(s); "
          f"threshold {cfg.threshold}, window {cfg.time_window_days} d"
          + (f"; median of {repeat} runs per side" if repeat > 1 else ""))
    batched = _median_run([run_ours(items, settings, BATCH) for _ in range(repeat)],
                          lambda r: statistics.mean(r["per_item"]))
    mean_b = statistics.mean(batched["per_item"])
    print(f"  ours, {BATCH} per transaction  {_us(mean_b)} per assignment   "
          f"{batched['clusters']:,} clusters   {_deciles(batched['per_item'])}")
    if len(items) <= 20_000:
        single = _median_run([run_ours(items, settings, 1) for _ in range(repeat)],
                             lambda r: statistics.mean(r["per_item"]))
        print(f"  ours, 1 per transaction    {_us(statistics.mean(single['per_item']))} per "
              f"assignment   {single['clusters']:,} clusters   "
              f"p95 {np.percentile(single['per_item'], 95) * 1e6:.1f} µs")
        assert single["labels"] == batched["labels"], "batching changed the clustering"
    if digest:
        ways = {f"{BATCH} per transaction": BATCH}
        if len(items) <= 20_000:
            ways["1 per transaction"] = 1
        for way, size in ways.items():
            d = run_ours(items, settings, size, digest=True)["digests"]
            print(f"  clusters digest, {way}: {d['stream']}, after recluster {d['recluster']}")
    mem_seconds, mem_labels = _median_run(
        [_out_of_gc(run_memory_only, items, settings) for _ in range(repeat)], lambda r: r[0])
    print(f"  ours, rule in memory only   {_us(mem_seconds / len(items))} per assignment   "
          f"{len(set(mem_labels)):,} clusters   (UserClusters, nothing persisted; ARI vs "
          f"persisted {adjusted_rand_score(mem_labels, batched['labels']):.4f})")
    run_seconds, run_labels = _median_run(
        [_out_of_gc(run_memory_runs, items, settings) for _ in range(repeat)], lambda r: r[0])
    same = adjusted_rand_score(run_labels, batched["labels"])
    print(f"  ours, rule in memory, as runs {_us(run_seconds / len(items))} per assignment   "
          f"{len(set(run_labels)):,} clusters   (assign_run per {BATCH} and owner, the version "
          f"join included; ARI vs persisted {same:.4f}"
          f", vs one by one {adjusted_rand_score(mem_labels, run_labels):.4f})")
    if ea is not None:
        seconds, labels = _median_run(
            [_out_of_gc(run_everalgo, ea, items, cfg.threshold, cfg.time_window_days)
             for _ in range(repeat)], lambda r: r[0])
        ea_mean = seconds / len(items)
        print(f"  EverAlgo cluster_by_geometry {_us(ea_mean)} per assignment   "
              f"{len(set(labels)):,} clusters   (in memory, nothing persisted)")
        print(f"  ratio EverAlgo / ours: persisted batched {ea_mean / mean_b:.2f}x, in memory "
              f"{ea_mean / (mem_seconds / len(items)):.2f}x one by one, "
              f"{ea_mean / (run_seconds / len(items)):.2f}x as runs;   "
              f"adjusted Rand index ours vs EverAlgo = "
              f"{adjusted_rand_score(labels, batched['labels']):.4f}")
    if consolidate_days:
        cons = run_ours(items, settings, BATCH, consolidate_days)
        print(f"  ours with consolidation every {consolidate_days:g} d: "
              f"{_us(statistics.mean(cons['per_item']))} per assignment, "
              f"{cons['consolidations']:,} consolidations, {cons['consolidated']:,} consolidated "
              f"clusters at the end   {_deciles(cons['per_item'])}")


def rule_only(locomo: str, cache: Path | None, scales: Sequence[int], settings: Settings,
              runs: int, distinct: bool = False) -> int:
    """``--rule-only``: :func:`run_memory_runs` ``runs`` times on LoCoMo and each scale,
    CPU-µs per Episode (least, median, each run), a digest of the labels and their adjusted
    Rand index against the service's clusters of the same stream."""
    base, _ = locomo_stream(locomo, cache)
    for scale in [0, *scales]:
        items = one_owner_stream(base, scale, distinct=distinct) if scale else base
        # the service's clusters on the same stream (untimed): the same rule gives the same
        # partition (run_ours lets the harness back into the collector: out again after)
        service_labels = run_ours(items, settings, BATCH)["labels"]
        gc.collect()
        gc.freeze()
        figures, labels = [], []
        for _ in range(runs):
            seconds, labels = run_memory_runs(items, settings)
            figures.append(seconds / len(items) * 1e6)
        same = adjusted_rand_score(labels, service_labels)
        name = f"one owner x{scale}" if scale else "LoCoMo"
        print(f"{name}: rule in memory, as runs: least {min(figures):.1f}, median "
              f"{statistics.median(figures):.1f} CPU-µs per Episode "
              f"(runs: {', '.join(f'{f:.1f}' for f in figures)}); labels "
              f"{hashlib.sha256(repr(labels).encode()).hexdigest()[:16]}, ARI vs the "
              f"service's {same:.4f}")
    return 0


def persisted_only(locomo: str, cache: Path | None, scales: Sequence[int], settings: Settings,
                   runs: int, consolidate_days: float = 0.0, distinct: bool = False) -> int:
    """``--persisted-only``: :func:`run_ours` 256 per transaction, ``runs`` times on LoCoMo
    and each scale, CPU-µs per Episode (least, median, then each run) and the digest of the
    first run's clusters: the figure a change to the service moves, with nothing else in
    the job (the least of several runs is the one least disturbed by a shared machine).
    ``consolidate_days`` (``--consolidated-only``): every eligible cluster consolidated
    every that many days of stream time, as the consolidated row; the tenths of the
    median run too, and the digest (no ``recluster``: the consolidating is the bench's)."""
    base, _ = locomo_stream(locomo, cache)
    for scale in [0, *scales]:
        items = one_owner_stream(base, scale, distinct=distinct) if scale else base
        figures, digest, runs_out = [], "", []
        for n in range(runs):
            out = run_ours(items, settings, BATCH, consolidate_days,
                           digest=n == 0 and not consolidate_days)
            figures.append(statistics.mean(out["per_item"]) * 1e6)
            if consolidate_days:
                runs_out.append(out)
                if n == 0:
                    with tempfile.TemporaryDirectory() as tmp:
                        digest = _consolidated_digest(items, settings, consolidate_days,
                                                      Path(tmp))
            digest = digest or out["digests"]["stream"]
        name = f"one owner x{scale}" if scale else "LoCoMo"
        way = (f"consolidated every {consolidate_days:g} d, " if consolidate_days else "")
        tenths = ""
        if runs_out:
            mid = _median_run(runs_out, lambda r: statistics.mean(r["per_item"]))
            tenths = (f"; median run: {mid['consolidations']:,} consolidations, "
                      f"{mid['consolidated']:,} consolidated clusters at the end, "
                      f"{_deciles(mid['per_item'])}")
        print(f"{name}: {way}{BATCH} per transaction: least {min(figures):.1f}, median "
              f"{statistics.median(figures):.1f} CPU-µs per Episode (runs: "
              f"{', '.join(f'{f:.1f}' for f in figures)}); clusters digest {digest}{tenths}")
    return 0


def _consolidated_digest(items: Sequence[Item], settings: Settings, consolidate_days: float,
                         root: Path) -> str:
    """:func:`cluster_digest` of ``items`` placed 256 per transaction with every eligible
    cluster consolidated every ``consolidate_days`` (untimed: :func:`run_ours`'s loop)."""
    rt, refs = stream_runtime(root, settings, items)
    svc = ClusterService(rt)  # type: ignore[arg-type]
    entries = _entries(items)
    next_consolidation = items[0].ts + consolidate_days * DAY
    seq = 0
    for start in range(0, len(items), BATCH):
        chunk = items[start:start + BATCH]
        if chunk[0].ts >= next_consolidation:
            _consolidate_all(svc, rt, refs.values(), seq)
            seq += 1
            next_consolidation = chunk[0].ts + consolidate_days * DAY
        place_chunk(svc, chunk, by_owner_of(chunk), refs, entries, lone=False,
                    flush=flush_of(chunk, refs, entries) if FLUSH else None)
    return cluster_digest(rt.db())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo", help="path to locomo10.json")
    parser.add_argument("--everalgo", type=Path,
                        help="unpacked everalgo-clustering wheel (see the docstring)")
    parser.add_argument("--scales", type=int, nargs="*", default=[20, 100, 184],
                        help="one-owner stream sizes, in LoCoMo streams (184 ≈ 100k)")
    parser.add_argument("--everalgo-max", type=int, default=11_000,
                        help="skip EverAlgo on streams longer than this (it scans every "
                             "cluster of the owner: ~7 ms per Episode at 54k)")
    parser.add_argument("--vectors-cache", type=Path,
                        help="a .npy of the LoCoMo vectors: read if present, else written")
    parser.add_argument("--consolidate-days", type=float, default=30.0,
                        help="consolidation period of the extra run (0: no such run)")
    parser.add_argument("--member-threshold", type=float, default=0.0,
                        help="clustering.member_threshold for our side (default 0: the "
                             "centroid rule alone, which is EverAlgo's rule; the shipped "
                             "default adds a member-fit check, so ARI vs EverAlgo drops)")
    parser.add_argument("--digest", action="store_true",
                        help="print a digest of the clusters each way of placing a stream "
                             "gives, and after recluster (compare two trees byte for byte)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per side on the LoCoMo stream, median reported (the one-owner "
                             "streams run once)")
    parser.add_argument("--rule-only", type=int, default=0, metavar="N",
                        help="only the rule in memory, as runs (run_memory_runs), N times per "
                             "stream: the least and every figure (the part of our side a "
                             "change to the rule moves, without SQLite's noise)")
    parser.add_argument("--persisted-only", type=int, default=0, metavar="N",
                        help="only ours, persisted, 256 per transaction, N times per stream: "
                             "the least, the median and every figure, and the clusters' digest")
    parser.add_argument("--consolidated-only", type=int, default=0, metavar="N",
                        help="as --persisted-only, with every eligible cluster consolidated "
                             "every --consolidate-days (the consolidated row), N times per "
                             "stream: least, median, every figure, the digest, the tenths")
    parser.add_argument("--distinct-texts", action="store_true",
                        help="one-owner streams: each copy's texts made its own (a copy's "
                             "invented word woven into every sentence; the same vectors), so "
                             "nothing read per text or per sentence is read warm")
    parser.add_argument("--pragma", action="append", default=[], metavar="NAME=VALUE",
                        help="run PRAGMA NAME=VALUE on system.db once opened (repeatable): "
                             "a setting of index/db.py's connect measured in place")
    parser.add_argument("--flush", action="store_true",
                        help="place every batch of 256 as the watcher's flush does "
                             "(on_entries_indexed_many, one daily log per owner and day, in "
                             "path order), not on_entries_indexed per owner")
    args = parser.parse_args(argv)
    PRAGMAS[:] = args.pragma
    global FLUSH
    FLUSH = args.flush
    if args.flush:
        print("placed as the watcher's flush: on_entries_indexed_many, one batch per daily log")
    if args.pragma:
        print(f"pragmas: {', '.join(args.pragma)}")
    settings = Settings()
    settings = replace(settings, clustering=replace(settings.clustering,
                                                    member_threshold=args.member_threshold))
    print(f"our clustering.member_threshold = {args.member_threshold:g}")
    if args.rule_only:
        return rule_only(args.locomo, args.vectors_cache, args.scales, settings,
                         args.rule_only, args.distinct_texts)
    if args.persisted_only:
        return persisted_only(args.locomo, args.vectors_cache, args.scales, settings,
                              args.persisted_only, distinct=args.distinct_texts)
    if args.consolidated_only:
        if not args.consolidate_days:
            parser.error("--consolidated-only needs --consolidate-days above 0, got 0")
        return persisted_only(args.locomo, args.vectors_cache, args.scales, settings,
                              args.consolidated_only, args.consolidate_days,
                              args.distinct_texts)
    ea = load_everalgo(args.everalgo) if args.everalgo else None
    t0 = time.perf_counter()
    base, _ = locomo_stream(args.locomo, args.vectors_cache)
    print(f"{len(base)} LoCoMo Episodes with bundled-MiniLM vectors in "
          f"{time.perf_counter() - t0:.1f} s (cache: {args.vectors_cache})")
    report("LoCoMo", base, settings, ea, args.consolidate_days, max(1, args.repeat),
           args.digest)
    for scale in args.scales:
        items = one_owner_stream(base, scale, distinct=args.distinct_texts)
        report(f"one owner x{scale}", items, settings,
               ea if len(items) <= args.everalgo_max else None, args.consolidate_days,
               digest=args.digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
