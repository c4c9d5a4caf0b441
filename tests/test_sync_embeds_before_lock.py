"""A sync of several logs (a Reflection commit's, the watcher's) embeds their new texts
before it takes the indexer lock, so an ``add`` meanwhile is not kept waiting through the
model call: on LoCoMo, adds during a run took ~650 ms against ~70 ms idle, a quarter of it
waiting for the lock a sync held while its model call waited for a model slot. Under the
lock every log is read and planned again as always: a text changed since it was embedded
is embedded as it reads then, never stored with the old text's vector."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

ANN, BOB = UserRef.of("ann"), UserRef.of("bob")
DAY = date(2026, 10, 12)


class GatedEmbedder(HashEmbedder):
    """Hash vectors; a call holding a text with ``slow`` in it waits for :attr:`gate` (a
    model call waiting for a model slot behind a Reflection's merge workers)."""

    def __init__(self) -> None:
        super().__init__(32)
        self.gate = threading.Event()
        self.waiting = threading.Event()

    def embed(self, texts: list[str]) -> np.ndarray:
        if any("slow" in t for t in texts):
            self.waiting.set()
            assert self.gate.wait(30)
        return super().embed(texts)


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = Runtime(root, Settings(), embedder=GatedEmbedder())
    yield runtime
    runtime.close()


def _append(rt: Runtime, ref: UserRef, content: str) -> str:
    return rt.store.append(ref, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00"},
                           {"Subject": "Note", "Content": content}, day=DAY).id


def _indexed(rt: Runtime) -> set[tuple[str, str]]:
    return {(r[0], r[1]) for r in rt.db().execute("SELECT user_id, id FROM entries")}


def test_an_add_is_synced_while_a_batch_sync_waits_for_the_model(rt: Runtime) -> None:
    embedder = rt.embedder
    assert isinstance(embedder, GatedEmbedder)
    narrative = _append(rt, ANN, "a slow narrative of the week")
    batch: list[object] = []
    worker = threading.Thread(target=lambda: batch.append(
        Indexer(rt).sync_paths([rt.store.path_for_id(ANN, narrative)])))
    worker.start()
    try:
        assert embedder.waiting.wait(10)  # the batch's model call is under way
        added = _append(rt, BOB, "Bob likes tea.")
        result = Indexer(rt).sync_path(rt.store.path_for_id(BOB, added), timeout=5,
                                       wanted=[added])
        assert result.upserted == 1
        assert _indexed(rt) == {("bob", added)}
    finally:
        embedder.gate.set()
        worker.join(30)
    assert _indexed(rt) == {("bob", added), ("ann", narrative)}
    assert [r.upserted for r in batch[0]] == [1]  # type: ignore[attr-defined]


def test_a_text_changed_after_it_was_embedded_ahead_is_stored_with_its_own_vector(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = _append(rt, ANN, "Ann adopted a dog.")
    path = rt.store.path_for_id(ANN, entry)
    real = Indexer._embedded_ahead

    def then_edited(self: Indexer, *args: object, **kwargs: object) -> object:
        made = real(self, *args, **kwargs)  # type: ignore[arg-type]
        path.write_text(path.read_text("utf-8").replace("a dog", "two cats"), "utf-8")
        return made

    monkeypatch.setattr(Indexer, "_embedded_ahead", then_edited)
    Indexer(rt).sync_paths([path])

    (read,) = rt.store.read(path).entries
    assert "two cats" in read.search_text
    stored = rt.vectors.get_vectors(Kind.EPISODE, ANN, [entry])[entry]
    assert np.allclose(stored, HashEmbedder(32).embed([read.search_text])[0])
