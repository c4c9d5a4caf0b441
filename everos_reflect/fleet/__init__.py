"""The fleet: many memory roots, one strategy run per root, spread over a Ray cluster.

A memory root is self-contained (Markdown plus its own ``.index/``), so a deployment too big
for one machine shards its users across roots and lets Ray place one task per root. Public:
the ``fleet.toml`` parser (:mod:`.config`), the per-root work that knows nothing of Ray
(:mod:`.work`), the Ray side (:mod:`.ray_backend`, imports Ray lazily) and the fleet scheduler
(:mod:`.schedule`).
"""

from everos_reflect.fleet.config import FleetConfig, parse_fleet, read_fleet, resolve_roots
from everos_reflect.fleet.work import RootResult, root_status, run_root, triage

__all__ = [
    "FleetConfig",
    "RootResult",
    "parse_fleet",
    "read_fleet",
    "resolve_roots",
    "root_status",
    "run_root",
    "triage",
]
