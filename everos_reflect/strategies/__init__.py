"""Strategies the engine runs on a schedule.

- :mod:`reflect` — ``reflect_episodes``: the Reflection run (settings, Select, the run loop);
- :mod:`consolidate` — Merge, Re-extract and the fact-coverage guard (builds a draft, writes
  nothing);
- :mod:`journal` — commits a draft through the ``merge_journal`` and recovers interrupted ones.

Each strategy is registered by one line in :data:`everos_reflect.engine.registry.STRATEGIES`.
"""
