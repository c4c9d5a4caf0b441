"""Embedding providers behind one small interface (:class:`Embedder`).

``make_embedder(settings.embedding)`` picks the provider named in the config; the heavy ones
(onnxruntime, openai) are imported only when chosen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from everos_reflect.embedding.base import CachingEmbedder, Embedder, HashEmbedder, l2_normalize
from everos_reflect.errors import ProviderUnavailable

if TYPE_CHECKING:
    from everos_reflect.settings import EmbeddingSettings

__all__ = ["CachingEmbedder", "Embedder", "HashEmbedder", "l2_normalize", "make_embedder"]


def make_embedder(settings: EmbeddingSettings) -> Embedder:
    """Build the embedder the ``[embedding]`` section names: ``local``, ``openai`` or ``hash``
    (the deterministic test fake, handy for demos without a model)."""
    provider = (settings.provider or "local").lower()
    if provider == "local":
        from everos_reflect.embedding.local import LocalEmbedder

        return LocalEmbedder(batch_size=settings.batch_size, threads=settings.threads,
                             low_memory=settings.low_memory)
    if provider == "openai":
        from everos_reflect.embedding.openai_embed import OpenAIEmbedder

        return OpenAIEmbedder(
            model=settings.model,
            dimensions=settings.dimensions,
            base_url=settings.base_url,
            api_key=settings.api_key,
            batch_size=settings.batch_size,
            timeout=settings.timeout_seconds,
            retries=settings.max_retries,
        )
    if provider == "hash":
        return HashEmbedder(settings.dimensions)
    raise ProviderUnavailable(f"unknown [embedding] provider {provider!r}: use 'local' or 'openai'")
