"""How large one request's prompt may be: ``[llm] max_prompt_tokens`` and the estimate it is
measured with (docs/limits.md, "What one request may hold").

Only ``max_entry_bytes`` and ``max_sources_per_merge`` bounded a merge's prompt: 50 sources of
256 KiB each made a 12 MiB request, sent as it was, and only a server answering 413 set the
cluster aside. The bound is checked before anything is sent, by the client itself for every
task of every tier (:func:`over_budget`), and by Reflection when it selects, so an oversized
cluster is merged in smaller parts instead (``strategies/consolidate.py``, ``fit_prompt``).

No tokenizer ships with the package (none may be downloaded at run time) and servers count
differently, so the estimate errs high, per script (:func:`text_tokens`): ASCII text one token
per 3 bytes (English runs about 4 characters a token: counted a third too many); a Chinese,
Japanese or Korean character (Han, Kana, Hangul, their punctuation and full-width forms) two
tokens, as each may be one to two tokens or more where the vocabulary lacks it (a flat
3 bytes a token counted it one, under what many models count); any other character outside
ASCII one token (a Cyrillic or Greek letter too, two bytes), and one beyond the Basic
Multilingual Plane (an emoji, a rare ideograph) two.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

#: The default ``[llm] max_prompt_tokens``: a 128k-token context (gpt-4o-mini's) less room
#: for the reply. A smaller local model (an 8k or 32k context) needs it set lower.
DEFAULT_MAX_PROMPT_TOKENS = 100_000
#: The range the setting accepts: under the floor not even a merge's own instructions fit; the
#: ceiling is a thousand times the largest context windows.
MIN_PROMPT_TOKENS = 1_000
MAX_PROMPT_TOKENS = 1_000_000_000
#: ASCII bytes a token.
BYTES_PER_TOKEN = 3
#: Tokens a Chinese, Japanese or Korean character counts, or one beyond the BMP; any other
#: character outside ASCII counts one.
WIDE_CHARACTER_TOKENS = 2
#: What the chat format adds around each message (its role, separators).
TOKENS_PER_MESSAGE = 4


def prompt_bytes(messages: Iterable[Mapping[str, str]]) -> int:
    """UTF-8 bytes of the messages' text (a lone surrogate counted as the 3 bytes it takes)."""
    return sum(len(str(m.get("content", "")).encode("utf-8", "surrogatepass"))
               for m in messages)


#: Runs of characters counted ``WIDE_CHARACTER_TOKENS`` each: Hangul Jamo; CJK radicals,
#: punctuation, Kana, Bopomofo, Hangul compatibility Jamo and the unified ideographs (U+2E80 to
#: U+9FFF); Hangul Jamo extended A; Hangul syllables and Jamo extended B; compatibility
#: ideographs and forms; half- and full-width forms; everything beyond the BMP.
_WIDE_RE = re.compile("[\u1100-\u11ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff"
                      "\ufe30-\ufe4f\uff00-\uffef\U00010000-\U0010ffff]+")


def text_tokens(text: str) -> int:
    """The tokens ``text`` is estimated at, on the high side (the module's doc says how)."""
    if text.isascii():
        return -(-len(text) // BYTES_PER_TOKEN)
    ascii_bytes = len(text.encode("ascii", "ignore"))
    wide = len(text) - len(_WIDE_RE.sub("", text))
    other = len(text) - ascii_bytes - wide
    thirds = ascii_bytes + BYTES_PER_TOKEN * (other + WIDE_CHARACTER_TOKENS * wide)
    return -(-thirds // BYTES_PER_TOKEN)


def estimate_tokens(messages: Iterable[Mapping[str, str]]) -> int:
    """The tokens a server is expected to count for ``messages``, on the high side."""
    listed = list(messages)
    return (sum(text_tokens(str(m.get("content", ""))) for m in listed)
            + TOKENS_PER_MESSAGE * len(listed))


def over_budget(messages: Iterable[Mapping[str, str]], budget: int | None) -> str | None:
    """Why ``messages`` may not be sent under ``budget`` tokens (None: they may, or there is
    no bound), naming the size and the setting."""
    if budget is None:
        return None
    listed = list(messages)
    tokens = estimate_tokens(listed)
    if tokens <= budget:
        return None
    return (f"the prompt is about {tokens:,} tokens ({prompt_bytes(listed):,} bytes), over "
            f"llm.max_prompt_tokens ({budget:,}); not sent")


__all__ = ["DEFAULT_MAX_PROMPT_TOKENS", "MAX_PROMPT_TOKENS", "MIN_PROMPT_TOKENS",
           "estimate_tokens", "over_budget", "prompt_bytes", "text_tokens"]
