"""An ``EVEROS_*`` variable whose section or key is empty (``EVEROS_LLM__``, ``EVEROS___``,
what a script joining an unset shell variable writes) is told which part is empty, with the
names it may be: it was "unknown key llm. (known: …)" and "unknown section ''", as if the
empty name were a misspelt one."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.errors import ConfigError
from everos_reflect.settings import load_settings


@pytest.mark.parametrize(("name", "said"), [
    ("EVEROS_LLM__", "the key after EVEROS_LLM__ is empty (known: api_key, base_url, "
                     "interactive_timeout_seconds, max_concurrency, max_prompt_tokens, "
                     "max_retries, model, provider, timeout_seconds)"),
    ("EVEROS___", "the section after EVEROS_ is empty (known: clustering, embedding, index, "
                  "limits, llm, scheduler, server)"),
    ("EVEROS___MODEL", "the section after EVEROS_ is empty (known: clustering, embedding, "
                       "index, limits, llm, scheduler, server)"),
])
def test_an_empty_section_or_key_is_named_as_empty(root: Path, name: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(root, env={name: "1"})
    assert caught.value.problems == [("environment", name, said)]
