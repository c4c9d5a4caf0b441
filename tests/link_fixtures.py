"""The hard-link tests' root: alice's one Episode log, which they link under other names."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

from everos_reflect.embedding import HashEmbedder
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

ALICE = UserRef.of("alice")
DAY = date(2026, 10, 12)


def alice_runtime(root: Path) -> Iterator[Runtime]:
    """A runtime on ``root`` whose alice has one Episode on :data:`DAY` (a fixture's body)."""
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(16))
    runtime.store.append(ALICE, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00",
                                               "parent_type": "memcell"},
                         {"Subject": "Pets", "Content": "Alice has a cat."}, day=DAY)
    yield runtime
    runtime.close()
