"""Roots for the fleet tests, and the opener Ray workers use to open them.

Ray workers import this module by name (the driver's working directory is on their path), so
everything here is a plain module-level function: picklable by reference.
"""

from __future__ import annotations

import time
from pathlib import Path

from everos_reflect.llm import ExtractiveLLM
from everos_reflect.llm.base import MergeRequest, MergeResult
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import add_episode, make_runtime

#: Three topics per user, three Episodes each: three clusters, three merges per user.
TOPICS = [
    [("2026-08-02T19:00:00+00:00", "{u} has no pets",
      "{u} has no pets: the Denver apartment does not allow a dog."),
     ("2026-09-04T21:10:00+00:00", "{u} adopted a dog named Toby",
      "{u} has a pet now: adopted a dog named Toby, a three-year-old lab mix."),
     ("2026-09-07T10:00:00+00:00", "{u} adopted a second dog named Buddy",
      "{u} adopted another dog named Buddy and now has two dogs, Toby and Buddy.")],
    [("2026-08-03T08:00:00+00:00", "{u} trains for a marathon",
      "{u} started marathon training: running forty kilometres a week in the park."),
     ("2026-08-20T08:00:00+00:00", "{u} marathon training injury",
      "{u} hurt a knee during marathon training running in the park."),
     ("2026-09-10T08:00:00+00:00", "{u} back to marathon training",
      "{u} is back to marathon training after the knee healed, running in the park again.")],
    [("2026-08-05T12:00:00+00:00", "{u} learns Spanish",
      "{u} began Spanish lessons online twice a week with a tutor from Madrid."),
     ("2026-08-25T12:00:00+00:00", "{u} Spanish lessons progress",
      "{u} passed the first Spanish lessons exam with the tutor from Madrid."),
     ("2026-09-15T12:00:00+00:00", "{u} Spanish lessons level two",
      "{u} moved to level two of the Spanish lessons with the Madrid tutor.")],
]


class SlowLLM(ExtractiveLLM):
    """The offline provider, answering each merge after ``delay`` seconds (a remote model)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def merge(self, req: MergeRequest) -> MergeResult:
        time.sleep(self.delay)
        return super().merge(req)


def open_test_root(root: str, merge_delay: float = 0.0) -> Runtime:
    """Opener for the fleet: the hash embedder and the offline provider (no model, no network)."""
    return make_runtime(Path(root), SlowLLM(merge_delay))


def user_ref(i: int) -> UserRef:
    return UserRef.of(f"u_{i:02d}")


def build_root(path: Path, users: int = 1, ome: str | None = None) -> list[tuple[str, str]]:
    """A memory root with ``users`` users of three clusters each, indexed and clustered, with
    nothing merged yet. Returns every Episode written as (user id, entry id)."""
    from everos_reflect.index.sync import Indexer

    path.mkdir(parents=True, exist_ok=True)
    if ome is not None:
        (path / "ome.toml").write_text(ome, "utf-8")
    rt = open_test_root(str(path))
    ids = []
    for i in range(users):
        ref = user_ref(i)
        for topic in TOPICS:
            for ts, subject, content in topic:
                name = ref.user_id
                ids.append((name, add_episode(rt, ref, ts, subject.format(u=name),
                                              content.format(u=name)).id))
    Indexer(rt).scan()
    rt.close()
    return ids


def build_roots(paths: list[Path], users: int = 1,
                ome: str | None = None) -> dict[Path, list[tuple[str, str]]]:
    """:func:`build_root` for each of ``paths``, all alike: the first is built, the others are
    copies of it (a build is deterministic, ids included, and costs ~0.3 s; a copy ~10 ms).
    Returns each root's Episodes, as :func:`build_root` does."""
    import shutil

    ids = build_root(paths[0], users=users, ome=ome)
    for path in paths[1:]:
        shutil.copytree(paths[0], path, symlinks=True)
    return {path: list(ids) for path in paths}
