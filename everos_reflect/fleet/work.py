"""One root's share of a fleet run, without Ray: open it, decide whether it has work, run it.

Everything here runs in whichever process Ray picks (or in the fleet driver, for the cheap
decisions), so it only takes plain, picklable arguments and returns a :class:`RootResult`.
A run goes through the root's own :class:`Engine`, exactly as ``everos-reflect trigger`` does
in-process: the same cross-process strategy lock (a root already running elsewhere answers
``busy`` and is not run twice), the same ``runs`` record, the same journal recovery.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from everos_reflect.engine.engine import Engine, overlay_ome, strategies_status
from everos_reflect.engine.registry import get_strategy
from everos_reflect.errors import ConfigError, EverosError, describe
from everos_reflect.problem_words import counted
from everos_reflect.runtime import Runtime
from everos_reflect.settings import load_settings

if TYPE_CHECKING:
    from everos_reflect.embedding.base import Embedder
    from everos_reflect.llm.base import LLM
    from everos_reflect.settings import LLMSettings

log = logging.getLogger(__name__)

#: Statuses of one root in a fleet run. ``ok``/``partial``/``failed``/``busy``/``disabled`` are
#: the engine's; ``idle`` means the driver found nothing to do and sent no task.
OK, PARTIAL, FAILED, BUSY, DISABLED, IDLE = "ok", "partial", "failed", "busy", "disabled", "idle"
#: Statuses that mean the root's work was not (all) done: a fleet run with any exits non-zero.
NOT_DONE = frozenset({PARTIAL, FAILED, BUSY})

#: Opens a root in the process that works on it; tests and benchmarks pass their own.
Opener = Callable[[str], "Runtime"]


@dataclass
class RootResult:
    """What happened to one root. Per-root detail stays in the root's ``runs`` and
    ``reflection_report``; this is the summary the fleet gathers."""

    root: str
    status: str
    merges: int = 0
    seconds: float = 0.0
    error: str | None = None
    run_id: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    #: Runs of this root left ``running`` by a dead process, marked ``abandoned`` before this
    #: run (a Ray retry after a worker died shows its predecessor here).
    recovered_runs: list[str] = field(default_factory=list)
    host: str | None = None
    pid: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- configuration: fleet defaults under the root's own ome.toml -------------------------------

#: Kept under this name for the fleet: the root's ``ome.toml`` laid over the fleet's defaults.
overlay = overlay_ome


def fleet_engine(runtime: Runtime, defaults: Mapping[str, Mapping[str, Any]] | None = None,
                 *, recover: bool = True,
                 last_good: Mapping[str, Mapping[str, Any]] | None = None) -> Engine:
    """The root's own :class:`Engine`, reading its strategies as the fleet's defaults overlaid
    by the root's ``ome.toml``. Locks, runs and recovery are the engine's own. The defaults
    go on ``runtime``, so every engine opened on it reads the same (a run's set-aside keys
    and revalidation depth, ``status``, ``clusters``). ``last_good``: the root's strategy
    configuration ``fleet serve`` last found valid, kept while its ``ome.toml`` is invalid."""
    if defaults is not None:
        runtime.ome_defaults = {k: dict(v) for k, v in defaults.items()}
    engine = Engine(runtime, recover=recover)
    if last_good is not None:
        engine.keep_config(last_good)
    return engine


# --- opening a root -----------------------------------------------------------------------------

T = TypeVar("T")


def _kept(cache: OrderedDict[Any, T], lock: threading.Lock, key: Any,
          make: Callable[[Any], T], limit: int) -> T:
    """``cache[key]``, made by ``make(key)`` when absent; at most ``limit`` kept, the least
    recently used let go first (a worker process outlives many roots)."""
    with lock:
        found = cache.get(key)
        if found is None:
            found = cache[key] = make(key)
            while len(cache) > limit:
                cache.popitem(last=False)
        else:
            cache.move_to_end(key)
        return found


#: Loaded embedders a worker process keeps, one per ``[embedding]`` configuration. A Ray
#: worker is reused for many tasks (``fleet serve`` keeps it for days), so roots that configure
#: different models must not pile up models in it: the least recently used one is let go.
MAX_EMBEDDERS = 2

_embedders: OrderedDict[Any, Embedder] = OrderedDict()
_embedders_lock = threading.Lock()


class GatedEmbedder:
    """A process's shared embedder, letting one model call run at a time.

    A fleet worker runs several roots at once (``roots_per_worker``) so that one root's local
    work fills another's waits for the LLM; their embedding calls, the bulk of a root's CPU,
    would otherwise run side by side, each on the task's threads, and a one-CPU worker would
    take two cores from the node. Queued here, a worker's model calls never use more threads
    than the CPUs Ray gave it, and the other roots' Python work (commits, selection) runs
    meanwhile. Everything but ``embed`` is the wrapped embedder's (``load``, ``threads``)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._gate = threading.Lock()

    def embed(self, texts: list[str]) -> Any:
        with self._gate:
            return self.inner.embed(texts)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)


def _gated(settings: Any) -> Embedder:
    from everos_reflect.embedding import make_embedder

    return GatedEmbedder(make_embedder(settings))  # type: ignore[return-value]


def _shared_embedder(settings: Any) -> Embedder:
    """One embedder per configuration per process: a Ray worker serving many roots loads the
    model once, not once per root (importing and loading it costs ~0.2 s of CPU per root),
    and its roots take turns for the model (:class:`GatedEmbedder`). At most
    :data:`MAX_EMBEDDERS` are kept; a root already holding an evicted one keeps using it
    until it closes."""
    return _kept(_embedders, _embedders_lock, settings, _gated, MAX_EMBEDDERS)


#: OpenAI-compatible clients a worker process keeps, per ``[llm]`` configuration, for the same
#: reason: building one (its HTTP connection pool and TLS context) took ~20 ms of CPU per
#: root, and a client kept from one root to the next also keeps its connections to the
#: provider open. A client is lent to one root at a time: its ``max_concurrency`` is that
#: root's, as under ``trigger``, also when a worker runs several roots at once. At most
#: :data:`MAX_LLMS` configurations, least recently used let go first, and as many idle
#: clients of each as roots ran at once.
MAX_LLMS = 2

_llms: OrderedDict[Any, list[LLM]] = OrderedDict()
_llms_lock = threading.Lock()


def _borrow_llm(settings: LLMSettings) -> LLM | None:
    """An OpenAI-compatible client for ``settings`` lent to the calling root until
    :func:`_give_back_llm`, or ``None`` (the root builds its own) for any other provider:
    the offline ``extractive`` one reads the root's own caching embedder, so it is never
    shared. A client holds no per-root state: each run meters its calls through its own
    wrapper (``RunContext.llm``)."""
    if settings.provider != "openai" or not (settings.base_url or settings.api_key):
        return None  # make_llm's fallback to extractive: the root's own, as above
    from everos_reflect.llm import make_llm

    idle = _kept(_llms, _llms_lock, settings, lambda _: [], MAX_LLMS)
    with _llms_lock:
        if idle:
            return idle.pop()
    return make_llm(settings)


def _give_back_llm(settings: LLMSettings, client: LLM) -> None:
    """Keep ``client`` for the next root of the same configuration (unless that configuration
    was let go meanwhile)."""
    with _llms_lock:
        idle = _llms.get(settings)
        if idle is not None:
            idle.append(client)


class FleetRuntime(Runtime):
    """A root opened by :func:`open_root`: its LLM, when the root first asks for it, is a
    client the process lends it for that configuration, given back when the root closes (a
    root the driver only judges never borrows one, nor imports the SDK)."""

    _borrowed: LLM | None = None

    @cached_property
    def llm(self) -> LLM:
        from everos_reflect.llm import make_llm

        self._borrowed = _borrow_llm(self.settings.llm)
        return self._borrowed if self._borrowed is not None else \
            make_llm(self.settings.llm, self.embedder)

    def close(self) -> None:
        super().close()
        borrowed, self._borrowed = self._borrowed, None
        if borrowed is not None:
            self.__dict__.pop("llm", None)
            _give_back_llm(self.settings.llm, borrowed)


def open_root(root: str) -> Runtime:
    """The default opener: the root's own settings; the embedder and, for an OpenAI-compatible
    provider, the LLM client shared within the process."""
    from everos_reflect.embedding import CachingEmbedder

    path = Path(root)
    if not path.is_dir():
        raise EverosError(f"no memory root at {path} on {socket.gethostname()}")
    settings = load_settings(path)
    embedding = settings.embedding
    if embedding.threads == 0:  # automatic: within a Ray task, the CPUs Ray gave it
        cpus = task_cpus()
        if cpus:
            embedding = replace(embedding, threads=cpus)
    return FleetRuntime(path, settings, embedder=CachingEmbedder(_shared_embedder(embedding)))


def task_cpus() -> int | None:
    """Whole CPUs Ray assigned to the task running this code, or ``None`` outside one.

    onnxruntime's automatic thread count is every core of the machine; two tasks on a 2-core
    node then run four busy threads and each root takes ~40 % longer (bench/fleet.py: 12 roots,
    2 workers, 23.9 s → 18.5 s with one thread per one-CPU task). Ray sets OMP_NUM_THREADS for
    numpy but onnxruntime does not read it, so the embedder is told directly.
    """
    ray = sys.modules.get("ray")  # never imported here: only a Ray worker has it loaded
    if ray is None or not ray.is_initialized():
        return None
    try:
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    except Exception:  # the driver, or a Ray without the call: no allotment to honour
        return None
    return max(1, int(cpus)) if cpus else None


# --- deciding, on the driver -------------------------------------------------------------------


def pending_work(runtime: Runtime, name: str) -> str | None:
    """Why ``name`` has something to do in this root, or ``None`` when it has nothing.

    Only Reflection can be judged from outside (index lag, interrupted merges, eligible
    clusters); any other strategy is assumed to have work and decides for itself.
    """
    from everos_reflect.index.db import db_built
    from everos_reflect.strategies.reflect import NAME

    if name != NAME:
        return f"{name} decides for itself"
    if not db_built(runtime.root):
        return "never indexed"
    from everos_reflect.clustering.service import ClusterService
    from everos_reflect.index.sync import Indexer
    from everos_reflect.strategies import journal
    from everos_reflect.strategies.reflect import users_with_clusters

    lag = Indexer(runtime).pending()
    if lag["files_changed"] or lag["files_deleted"]:
        return f"index behind by {counted(lag['files_changed'] + lag['files_deleted'], 'log')}"
    interrupted = journal.pending(runtime.db())
    if interrupted:
        return f"{counted(len(interrupted), 'interrupted merge')} to recover"
    clusters = ClusterService(runtime)
    for ref in users_with_clusters(runtime):
        if clusters.eligible_for_reflection(ref, 1):
            return f"eligible clusters ({ref})"
    return None


@dataclass(frozen=True)
class Assessment:
    """The driver's verdict on one root: settled without a task (``result``: ``disabled``,
    ``idle``, or ``failed`` to open), or a task to send, with an estimate of its ``work``."""

    result: RootResult | None
    #: Clusters plus Episodes the run would merge (:func:`work_estimate`); ``None`` when the
    #: driver cannot tell (no probing, another strategy, no index yet, unreadable index).
    work: int | None = None


def work_estimate(runtime: Runtime, name: str, settings: Mapping[str, Any]) -> int | None:
    """How much a run of ``name`` has to do in this root, in no unit but comparable between
    roots: eligible clusters (two LLM calls and a commit each) plus the Episodes they fold
    (embedded, archived), within the run's ``max_clusters_per_run``/``max_sources_per_merge``.
    A fleet hands out its largest roots first so that no long root starts last and leaves the
    other workers idle at the end. ``None`` for strategies it cannot be told for."""
    from everos_reflect.index import reads
    from everos_reflect.index.db import db_built
    from everos_reflect.strategies.reflect import NAME

    if name != NAME or not db_built(runtime.root):
        return None
    clusters, episodes = reads.reflection_backlog(
        runtime.db(), max_clusters=int(settings.get("max_clusters_per_run", 10)),
        max_sources=int(settings.get("max_sources_per_merge", 50)))
    return clusters + episodes


def assess(root: str, name: str, *, force: bool, defaults: Mapping[str, Mapping[str, Any]],
           probe: bool, opener: Opener = open_root) -> Assessment:
    """Decide on the driver whether ``root`` needs a task and, when probing, how much work it
    holds. Anything that cannot be judged here (an unreadable index, a broken config) sends a
    task, which then reports it properly."""
    try:
        runtime = opener(root)
    except (EverosError, OSError) as exc:
        return Assessment(RootResult(root, FAILED, error=str(exc)))
    try:
        engine = fleet_engine(runtime, defaults, recover=False)
        try:
            settings = engine.settings_for(name)
        except ConfigError:
            return Assessment(None)
        if not settings["enabled"] and not force:
            return Assessment(RootResult(root, DISABLED, error=f"{name} is disabled in this "
                                         "root (set enabled = true, or use --force)"))
        if not probe:
            return Assessment(None)
        try:
            reason = pending_work(runtime, name)
            if reason is None:
                return Assessment(RootResult(root, IDLE))
            work = work_estimate(runtime, name, settings)
        except (EverosError, sqlite3.Error, OSError) as exc:
            log.info("%s: cannot tell whether %s has work (%s); sending it a task", root, name,
                     exc)
            return Assessment(None)
        log.debug("%s: %s has work: %s (estimate %s)", root, name, reason, work)
        return Assessment(None, work)
    finally:
        runtime.close()


def triage(root: str, name: str, *, force: bool, defaults: Mapping[str, Mapping[str, Any]],
           probe: bool, opener: Opener = open_root) -> RootResult | None:
    """Decide on the driver whether ``root`` needs a task: a result when it does not
    (``disabled`` or ``idle``), ``None`` when it does (:func:`assess` without the estimate)."""
    return assess(root, name, force=force, defaults=defaults, probe=probe,
                  opener=opener).result


def largest_first(assessed: Sequence[tuple[str, int | None]]) -> list[str]:
    """Roots in the order to hand them out: unknown work first (it may be the largest: a root
    never indexed indexes everything), then the largest estimate first; the fleet's own order
    among equals. Longest-first keeps the end of a run short: the last roots to start are the
    small ones, so no worker waits long for the one still finishing a big root."""
    ranked = sorted(enumerate(assessed),
                    key=lambda item: (item[1][1] is not None, -(item[1][1] or 0), item[0]))
    return [root for _, (root, _) in ranked]


# --- running, on a worker ----------------------------------------------------------------------


def run_root(root: str, name: str, *, force: bool = False,
             defaults: Mapping[str, Mapping[str, Any]] | None = None,
             opener: Opener = open_root, trigger: str = "fleet",
             last_good: Mapping[str, Mapping[str, Any]] | None = None) -> RootResult:
    """Run strategy ``name`` on one root to completion, in this process, and summarise it.
    ``last_good``: the configuration to keep should the root's ``ome.toml`` be invalid now
    (``fleet serve``'s, as :func:`fleet_engine` takes it); without it such a root fails.

    Never raises for a problem of the root: every failure is a ``failed`` result naming it.
    """
    started = time.perf_counter()
    result = RootResult(root, FAILED, host=socket.gethostname(), pid=os.getpid())
    runtime = None
    try:
        get_strategy(name)
        runtime = opener(root)
        engine = fleet_engine(runtime, defaults, recover=False, last_good=last_good)
        result.recovered_runs = engine.recover()
        outcome = engine.trigger(name, force=force, timeout=None, trigger=trigger)
        result.status, result.error, result.run_id = outcome.status, outcome.error, \
            outcome.run_id
        result.counts = dict(outcome.counts)
        result.merges = int(outcome.counts.get("merged", 0))
    except (EverosError, sqlite3.Error, OSError) as exc:
        result.error = describe(exc)
    except Exception as exc:  # a bug must still come back as this root's failure
        log.exception("%s: %s failed unexpectedly", root, name)
        result.error = describe(exc)
    finally:
        if runtime is not None:
            runtime.close()
        result.seconds = round(time.perf_counter() - started, 3)
    return result


# --- status --------------------------------------------------------------------------------------


def root_status(root: str, defaults: Mapping[str, Mapping[str, Any]] | None = None,
                opener: Opener = open_root) -> dict[str, Any]:
    """One root's schedule (every strategy's last and next run) and index lag, from the same
    functions ``everos-reflect status`` uses; a root that cannot be read says why
    (``error``), and one whose ``ome.toml`` is invalid says so (``config.strategies_error``;
    ``config.in_force`` is ``none`` when no strategy runs there until it is fixed)."""
    from everos_reflect.index.db import db_built
    from everos_reflect.index.sync import Indexer
    from everos_reflect.status import strategies_document

    doc: dict[str, Any] = {"root": root}
    try:
        runtime = opener(root)
    except (EverosError, OSError) as exc:
        return {**doc, "error": str(exc), "config": {}, "strategies": [], "index": None}
    try:
        try:
            doc["strategies"] = strategies_status(runtime, fleet_engine(runtime, defaults,
                                                                       recover=False))
        except (EverosError, sqlite3.Error) as exc:
            doc["strategies"], doc["error"] = [], str(exc)
        # the error once per root, as `status` says it (every row repeated it), and once
        # only: a root's ``config_error`` said it a second time, beside
        # ``config.strategies_error``; ``config.in_force`` says whether anything runs
        doc.update(strategies_document(doc["strategies"]))
        try:
            # None: never indexed (status never creates an index as a side effect)
            doc["index"] = Indexer(runtime).pending() if db_built(runtime.root) \
                else None
        except (EverosError, sqlite3.Error, OSError) as exc:
            doc["index"] = {"error": str(exc)}
    finally:
        runtime.close()
    return doc
