"""Set-aside keys, shared by every strategy: what an item the server refused for good is kept
aside under.

A request the server refused for good (HTTP 400, 413, 422: asked again it answers the same)
sets its item aside in the strategy's changes cursor -- a Reflection cluster, a belief tier's
window, a task type's tasks, a stale insight -- so it is not sent again, and refused again, by
every run. What the server refused is the request, and a request is the item's data *and* what
the settings put around it: the prompt templates (with the language rule) and the provider,
model and server it goes to. So the key is both (:meth:`SentWith.key`): an edit of the data,
or a person who rewrites a prompt or picks a bigger model to get past the refusal, brings the
item back, once (refused again, it is kept aside under the new key). Keyed on the data alone,
a changed prompt or model left the item aside until someone edited it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from everos_reflect.llm.budget import DEFAULT_MAX_PROMPT_TOKENS

if TYPE_CHECKING:
    from everos_reflect.llm.prompts import Prompts
    from everos_reflect.runtime import Runtime


def llm_target(runtime: Runtime) -> str:
    """The provider, model and server requests go to: a bigger model or another server may
    take what this one refused.

    The client's own when the runtime has one: a client an embedding caller or a test hands
    to :class:`~everos_reflect.runtime.Runtime` need not be what ``[llm]`` says, and keyed on
    ``[llm]``, what it set aside stayed aside when another client took its place. Else as
    ``[llm]`` configures one, so that ``status`` need not build a client (one built from
    ``[llm]`` keeps its model and ``base_url``: the same key)."""
    llm = runtime.__dict__.get("llm")  # built or injected; reading runtime.llm would build it
    if llm is not None:
        provider, model = getattr(llm, "provider", ""), getattr(llm, "model", "")
        base_url = getattr(llm, "base_url", None)
    else:
        cfg = runtime.settings.llm
        provider, model, base_url = cfg.provider, cfg.model, cfg.base_url
    target = f"{provider}:{model}@{base_url or ''}"
    # what was set aside as over the prompt budget comes back when the budget is raised; the
    # default leaves the keys written before the budget existed as they were
    budget = prompt_budget(runtime)
    if budget is not None and budget != DEFAULT_MAX_PROMPT_TOKENS:
        target += f" prompt<={budget}"
    return target


def prompt_budget(runtime: Runtime) -> int | None:
    """The estimated tokens one request may hold (``[llm] max_prompt_tokens``), or None when
    no prompt is sent: the offline provider merges without one. The client's own when the
    runtime has one (as :func:`llm_target`), else as ``[llm]`` would build it."""
    llm = runtime.__dict__.get("llm")
    if llm is not None:
        budget = getattr(llm, "max_prompt_tokens", None)
        return budget if isinstance(budget, int) else None
    cfg = runtime.settings.llm
    sends = cfg.provider == "openai" and bool(cfg.base_url or cfg.api_key)  # as make_llm
    return cfg.max_prompt_tokens if sends else None


def tier_prompts(settings: Mapping[str, Any]) -> Prompts:
    """The prompts a derived tier's calls use: its ``prompts`` overrides (the tiers take no
    ``language``: the language rule is the default one)."""
    from everos_reflect.llm.prompts import Prompts

    return Prompts.from_settings({"prompts": settings.get("prompts") or {}})


@dataclass(frozen=True)
class SentWith:
    """What a strategy's settings put into its requests, whatever the data: a digest of the
    prompts its calls use (``prompts``) and the provider, model and server (``llm``)."""

    prompts: str
    llm: str

    @classmethod
    def tasks(cls, runtime: Runtime, settings: Mapping[str, Any],
              names: Iterable[str]) -> SentWith:
        """For a tier whose calls are the tasks ``names``, under its settings table."""
        return cls(tier_prompts(settings).task_fingerprint(names), llm_target(runtime))

    def key(self, sent: str) -> str:
        """The set-aside key of an item whose data reads ``sent`` (a text hash, a digest of
        the members): changes with either the data or the settings."""
        return hashlib.sha256(f"{sent}\nprompts:{self.prompts}\nllm:{self.llm}".encode()
                              ).hexdigest()


__all__ = ["SentWith", "llm_target", "prompt_budget", "tier_prompts"]
