"""Embedding providers behind one small interface (:class:`Embedder`).

``make_embedder(settings.embedding)`` picks the provider named in the config; the heavy ones
(onnxruntime, openai) are imported only when chosen.
"""

from __future__ import annotations

from typing import Any

from everos_reflect.embedding.base import Embedder, HashEmbedder, l2_normalize
from everos_reflect.errors import ProviderUnavailable

__all__ = ["Embedder", "HashEmbedder", "l2_normalize", "make_embedder"]


def make_embedder(settings: Any) -> Embedder:
    """Build the embedder ``settings.provider`` names (``local``, ``openai`` or ``hash``).

    ``settings`` is the ``[embedding]`` section (``Settings.embedding``); optional keys that a
    section lacks fall back to the provider's defaults.
    """
    provider = str(getattr(settings, "provider", "local") or "local").lower()
    batch_size = int(getattr(settings, "batch_size", 0) or 32)
    if provider == "local":
        from everos_reflect.embedding.local import LocalEmbedder

        threads = int(getattr(settings, "threads", 0) or 0)
        return LocalEmbedder(batch_size=batch_size, threads=threads)
    if provider == "openai":
        from everos_reflect.embedding.openai_embed import OpenAIEmbedder

        return OpenAIEmbedder(
            model=str(getattr(settings, "model", "") or ""),
            base_url=getattr(settings, "base_url", None) or None,
            api_key=getattr(settings, "api_key", None) or None,
            dimensions=getattr(settings, "dimensions", None) or None,
            batch_size=batch_size,
            timeout=float(getattr(settings, "timeout_seconds", 0) or 30.0),
            retries=int(getattr(settings, "max_retries", 2)),
        )
    if provider == "hash":
        return HashEmbedder(int(getattr(settings, "dimensions", 0) or 64))
    raise ProviderUnavailable(f"unknown embedding provider {provider!r}: use 'local' or 'openai'")
