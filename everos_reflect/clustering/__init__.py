"""Geometric clustering of Episodes by similarity and time.

``online`` holds the pure assignment rule; ``service`` keeps the clusters in ``system.db``
(online updates from the indexer, consolidation bookkeeping for Reflection, full rebuild).
"""

from everos_reflect.clustering.online import Candidate, Decision, choose_cluster
from everos_reflect.clustering.service import ClusterInfo, ClusterService, Member, UnknownCluster

__all__ = [
    "Candidate",
    "ClusterInfo",
    "ClusterService",
    "Decision",
    "Member",
    "UnknownCluster",
    "choose_cluster",
]
