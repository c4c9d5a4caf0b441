"""The link tests' roots: alice's one Episode log, which the hard-link tests link under other
names; ann's, indexed, whose logs and folders the broken-link tests replace by links."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
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


ANN = UserRef.of("u_ann")


def indexed_ann_root(root: Path) -> Path:
    """``root`` with ann's one Episode (2026-10-11), indexed (a fixture's body)."""
    rt = Runtime(root, Settings(), embedder=HashEmbedder(32))
    try:
        rt.store.append(ANN, Kind.EPISODE, {"timestamp": "2026-10-11T09:00:00+00:00",
                                              "parent_type": "memcell"},
                        {"Subject": "Cats", "Content": "Ann has a cat."}, day=date(2026, 10, 11))
        Indexer(rt).reindex()
    finally:
        rt.close()
    return root


def run(*args: str) -> Result:
    """The CLI run in-process on ``args``."""
    return CliRunner().invoke(cli, list(args))
