"""Reflection's set-aside clusters: the ones the server refused for good, unchanged since.

A merge the server refused for good (HTTP 400, 413, 422: asked again it answers the same) sets
its cluster aside (:meth:`ReflectionRun._failed`): the changes cursor keeps the cluster under
:meth:`Selection.aside_key`, and no run sends it again until a member is edited, joins or
leaves, or the prompts, language or model change. Without this view the cluster simply never
merged, and nothing but an old ``reflection_report`` row said why. ``status`` counts them and
``clusters`` marks each with the server's answer; a cluster counts as set aside only while its
key still matches what a run would select now (the Markdown is read, as Select reads it, and
the prompts and model as a run takes them), so one that an edit brought back is not shown.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from everos_reflect.errors import EverosError
from everos_reflect.index import cursors, reads
from everos_reflect.llm.prompts import Prompts
from everos_reflect.model import UserRef

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

#: What separates the server's answer from the ids in a set-aside row's error
#: (:func:`~everos_reflect.strategies.belief_store.set_aside_error`).
_IDS = "; set aside: "


@dataclass(frozen=True)
class SetAsideCluster:
    """One cluster Reflection will not send again until it changes, and why."""

    ref: UserRef
    cluster_id: str
    #: the episodes the refused merge sent (the old narrative first, for an update)
    members: tuple[str, ...]
    #: the server's answer, as the cluster's ``reflection_report`` row recorded it
    reason: str
    since: str | None

    def to_json(self) -> dict[str, object]:
        return {"app_id": self.ref.app, "project_id": self.ref.project,
                "user_id": self.ref.user_id, "cluster_id": self.cluster_id,
                "members": list(self.members), "reason": self.reason, "since": self.since}


def set_aside_clusters(runtime: Runtime, ref: UserRef | None = None) -> list[SetAsideCluster]:
    """Every cluster (of ``ref``, else of the root) that ``reflect_episodes`` holds aside now,
    by owner then cluster id."""
    from everos_reflect.clustering.service import ClusterService, UnknownCluster
    from everos_reflect.strategies.aside import llm_target, prompt_budget
    from everos_reflect.strategies.consolidate import fit_prompt, select
    from everos_reflect.strategies.reflect import NAME

    conn = runtime.db()
    keys: dict[tuple[UserRef, str], dict[str, str | None]] = defaultdict(dict)
    for owner, cluster_id, key, run_id in cursors.rows(conn, NAME, ref):
        keys[(owner, cluster_id)][key] = run_id
    if not keys:
        return []
    refusals = reads.refusals_for_good(conn)
    clusters = ClusterService(runtime)
    max_sources, prompts, ratio = _merge_settings(runtime)
    target, budget = llm_target(runtime), prompt_budget(runtime)
    out = []
    for (owner, cluster_id), runs in sorted(keys.items(), key=lambda item: (
            str(item[0][0]), item[0][1])):
        try:
            info = clusters.cluster(cluster_id)
        except UnknownCluster:  # reclustered since: its members are in other clusters now
            continue
        if info.ref != owner:
            continue
        picked = select(runtime.store, clusters, info, max_sources=max_sources)
        if picked is None:
            continue  # merged since: nothing left to send
        # aside whole (over the prompt budget), or the part of it that fits (refused by the
        # server), as the run keys them
        found = [(sel, key) for sel in (picked, fit_prompt(picked, prompts, budget, ratio)[0])
                 if (key := sel.aside_key(prompts, target)) in runs]
        if not found:
            continue  # changed (or its prompts, or model): the next run sends it
        picked, key = found[0]
        ids = [e.id for e in picked.replaced]
        error, since = refusals.get((owner, cluster_id, runs[key])) or _renamed(
            refusals, owner, runs[key], ids) or ("refused for good (its report row is gone)",
                                                 None)
        out.append(SetAsideCluster(owner, cluster_id, tuple(e.id for e in picked.replaced),
                                   error.split(_IDS, 1)[0], since))
    return out


def _renamed(refusals: dict[tuple[UserRef, str, str | None], tuple[str, str]], owner: UserRef,
             run_id: str | None, ids: list[str]) -> tuple[str, str] | None:
    """The refusal of a cluster renamed since (the id its first member's own was held by a
    narrative's cluster, now gone: its set-aside row follows it, its ``reflection_report``
    row keeps the id it named): the row of that owner and run naming the same members."""
    from everos_reflect.strategies.belief_store import set_aside_error

    named = set_aside_error("", ids).split(_IDS, 1)[1].split(" (sent again ", 1)[0]
    for (who, _, run), found in sorted(refusals.items(), key=lambda item: item[0][1]):
        if (who, run) == (owner, run_id) and \
                found[0].split(_IDS, 1)[-1].split(" (sent again ", 1)[0] == named:
            return found
    return None


def _merge_settings(runtime: Runtime) -> tuple[int, Prompts, float]:
    """``max_sources_per_merge``, the prompts (``language``, ``prompts``) and
    ``max_narrative_ratio`` as a run would take them: what a merge sends (fitted to the
    prompt budget with room for its fact extraction), and the prompts it sends it with, are
    part of the set-aside key. A broken ``ome.toml`` (the daemon keeps its last good one)
    reads as the defaults here."""
    from everos_reflect.strategies.holdback import HoldRules, reflect_settings
    from everos_reflect.strategies.reflect import DEFAULT_MAX_NARRATIVE_RATIO

    settings = reflect_settings(runtime)
    try:
        prompts = Prompts.from_settings({"language": settings.get("language", "auto"),
                                         "prompts": settings.get("prompts") or {}})
    except EverosError:  # ConfigError among them
        prompts = Prompts()
    ratio = float(settings.get("max_narrative_ratio", DEFAULT_MAX_NARRATIVE_RATIO))
    return HoldRules.from_settings(settings).max_sources, prompts, ratio


__all__ = ["SetAsideCluster", "set_aside_clusters"]
