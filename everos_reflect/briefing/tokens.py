"""Token counts with the bundled all-MiniLM-L6-v2 WordPiece tokenizer (no network, no model).

A briefing's budget is counted in these tokens. WordPiece splits on whitespace and punctuation
first, so the count of lines joined by newlines is the sum of the lines' counts: the packer can
add items up one by one and the block it renders stays within what it added.
"""

from __future__ import annotations

import threading
from functools import cache
from typing import Any


class TokenCounter:
    """Counts and trims text in tokens of the bundled tokenizer (thread-safe, loaded once)."""

    def __init__(self, tokenizer: Any) -> None:
        tokenizer.no_truncation()  # the shipped file truncates at 128 and pads for the model
        tokenizer.no_padding()
        self._tok = tokenizer
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids) if text else 0

    def count_many(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        with self._lock:  # encode_batch uses the tokenizer's own thread pool
            encoded = self._tok.encode_batch(texts, add_special_tokens=False)
        return [len(e.ids) for e in encoded]

    def truncate(self, text: str, limit: int, marker: str = " …") -> str:
        """``text`` cut at a token boundary so that it, with ``marker``, fits ``limit`` tokens."""
        encoded = self._tok.encode(text, add_special_tokens=False)
        if len(encoded.ids) <= limit:
            return text
        keep = max(0, limit - self.count(marker))
        if keep == 0:
            return ""
        end = encoded.offsets[keep - 1][1]
        return text[:end].rstrip() + marker


@cache
def default_counter() -> TokenCounter:
    """The counter over the vendored tokenizer (``everos_reflect/assets/minilm``)."""
    from tokenizers import Tokenizer

    from everos_reflect.embedding.local import default_tokenizer_path

    return TokenCounter(Tokenizer.from_file(str(default_tokenizer_path())))
