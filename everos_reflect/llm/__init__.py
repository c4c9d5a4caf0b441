"""LLM providers behind one interface (:class:`~everos_reflect.llm.base.LLM`).

``make_llm(settings.llm)`` builds the configured provider: ``openai`` (any OpenAI-compatible
server) or ``extractive`` (deterministic, offline, the default). Tests use
:class:`~everos_reflect.llm.base.ScriptedLLM`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from everos_reflect.llm.base import (
    LLM,
    FactsRequest,
    FactsResult,
    MergeMember,
    MergeRequest,
    MergeResult,
    ScriptedLLM,
    Usage,
)
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.llm.prompts import DEFAULT_PROMPTS, Prompts

if TYPE_CHECKING:
    from everos_reflect.embedding.base import Embedder

__all__ = [
    "DEFAULT_PROMPTS",
    "LLM",
    "ExtractiveLLM",
    "FactsRequest",
    "FactsResult",
    "MergeMember",
    "MergeRequest",
    "MergeResult",
    "Prompts",
    "ScriptedLLM",
    "Usage",
    "make_llm",
]

log = logging.getLogger(__name__)


class _LLMSettings(Protocol):
    provider: str
    model: str
    base_url: str | None
    api_key: str | None
    timeout_seconds: float
    max_retries: int
    max_concurrency: int
    max_prompt_tokens: int
    interactive_timeout_seconds: float


def make_llm(settings: _LLMSettings, embedder: Embedder | None = None) -> LLM:
    """The provider ``settings`` (an ``[llm]`` section) asks for.

    ``embedder`` lets the offline ``extractive`` provider recognise paraphrases and versions of
    a fact by meaning (without it, by shared words only).

    ``openai`` with neither a ``base_url`` nor an ``api_key`` cannot reach any server, so it
    falls back to ``extractive`` with a warning; every merge's audit row names the provider
    that actually wrote it.
    """
    if settings.provider == "extractive":
        return ExtractiveLLM(embedder)
    if settings.provider != "openai":
        raise ValueError(f"unknown LLM provider {settings.provider!r} (openai | extractive)")
    if not settings.base_url and not settings.api_key:
        log.warning("llm.provider = openai but no base_url or api_key: using extractive")
        return ExtractiveLLM(embedder)
    from everos_reflect.llm.openai_llm import OpenAILLM  # the SDK is slow to import

    return OpenAILLM(
        model=settings.model,
        base_url=settings.base_url,
        api_key=settings.api_key,
        timeout_seconds=settings.timeout_seconds,
        max_retries=settings.max_retries,
        max_concurrency=settings.max_concurrency,
        max_prompt_tokens=settings.max_prompt_tokens,
        interactive_timeout_seconds=settings.interactive_timeout_seconds,
    )
