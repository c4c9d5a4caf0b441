"""What the offline merge's rule tests share: the bundled embedder, and a narrative merged
from a few one-line Episodes two days apart."""

from __future__ import annotations

from datetime import UTC, datetime

from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.llm.base import MergeMember, MergeRequest
from everos_reflect.llm.extractive import ExtractiveLLM


def loaded_local() -> LocalEmbedder:
    """The bundled MiniLM on one thread (the rules are calibrated with it)."""
    embedder = LocalEmbedder(batch_size=16, threads=1)
    embedder.load()
    return embedder


def narrative(llm: ExtractiveLLM, *texts: str, subject: str = "Notes") -> str:
    """The narrative an initial merge writes of ``texts``, one Episode each, in order."""
    members = [MergeMember(f"ep_202611{10 + 2 * i}_0001",
                           datetime(2026, 11, 10 + 2 * i, 10, tzinfo=UTC), subject, text)
               for i, text in enumerate(texts)]
    return llm.merge(MergeRequest("init", members)).content
