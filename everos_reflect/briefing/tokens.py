"""Token counts with the bundled all-MiniLM-L6-v2 WordPiece tokenizer (no network, no model).

A briefing's budget is counted in these tokens. WordPiece splits on whitespace and punctuation
first, so the count of lines joined by newlines is the sum of the lines' counts: the packer can
add items up one by one and the block it renders stays within what it added.

Tokenizing costs tens of microseconds a line, so a packer with thousands of candidates first asks
:meth:`TokenCounter.at_least` and :meth:`TokenCounter.surely_within`, which read the text's
ASCII (and CJK ideographs) only and never tokenize, and tokenizes just the items that may
still fit.
"""

from __future__ import annotations

import re
import threading
from functools import cache
from typing import Any

# What the bundled tokenizer does before WordPiece (its BertNormalizer and BertPreTokenizer):
# drop control characters (\x0b and \x0c too: they are not whitespace to it), split on
# whitespace, and make every punctuation character a piece of its own; every ASCII character
# that is not a letter or digit, space or control is punctuation to it. Each piece then gives
# at least one token (a word WordPiece cannot split is one [UNK]).
_ASCII_PUNCT = r"!-/:-@\[-`{-~"
_SEPARATOR = r" \t\n\r" + _ASCII_PUNCT
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ASCII_PIECE = re.compile(r"[A-Za-z0-9]+|[" + _ASCII_PUNCT + "]")
# in any text: each ASCII punctuation character, and each ASCII run of letters and digits
# with a separator (or the text's end) on both sides; a run touching any other character may
# join it (``café``) or lose it (a control character between two runs joins them)
_SURE_PIECE = re.compile(
    r"[" + _ASCII_PUNCT + r"]|(?<![^" + _SEPARATOR + r"])[A-Za-z0-9]+(?![^" + _SEPARATOR + r"])")

# each CJK ideograph, which the normalizer sets apart as a piece of its own (BERT's "Chinese
# characters": these blocks): Chinese or Japanese text has no ASCII pieces to count, and each
# of its lessons was tokenized whole to find it could not fit
_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df"
                  "\U0002a700-\U0002b81f\U0002b920-\U0002ceaf\U0002f800-\U0002fa1f]")


#: Counts of at most this many texts of at most ``MEMO_CHARS`` characters are remembered (the
#: lines a briefing may keep come back call after call); the table is emptied when full.
MEMO_ENTRIES = 16_384
MEMO_CHARS = 512


class TokenCounter:
    """Counts and trims text in tokens of the bundled tokenizer (thread-safe, loaded once)."""

    def __init__(self, tokenizer: Any) -> None:
        tokenizer.no_truncation()  # the shipped file truncates at 128 and pads for the model
        tokenizer.no_padding()
        self._tok = tokenizer
        self._unk = tokenizer.token_to_id("[UNK]")  # None: no such token, every one counts 1
        # the longest word WordPiece spells; a longer one is one [UNK] (counted a character
        # each): without an [UNK] token no word is counted so
        longest = getattr(tokenizer.model, "max_input_chars_per_word", None)
        self._longest_word = longest if isinstance(longest, int) and self._unk is not None \
            else 10**9
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}  # short texts counted before (same text, same count)
        # the bounds below hold for the BERT pipeline only; any other tokenizer is always counted
        self._bert = (type(tokenizer.normalizer).__name__, type(tokenizer.pre_tokenizer).__name__,
                      type(tokenizer.model).__name__) == (
                          "BertNormalizer", "BertPreTokenizer", "WordPiece")

    def at_least(self, text: str) -> int:
        """A lower bound of :meth:`count` read from the text's ASCII and CJK ideographs
        alone (no tokenizing): the pieces the tokenizer surely makes. Exact for ASCII prose
        without subwords; 0 when the tokenizer is not the bundled kind."""
        if not self._bert or not text:
            return 0
        if text.isascii() and not _ASCII_CONTROL.search(text):
            return sum(map(self._piece_floor, _ASCII_PIECE.findall(text)))
        return (sum(map(self._piece_floor, _SURE_PIECE.findall(text)))
                + len(_CJK.findall(text)))

    def _piece_floor(self, piece: str) -> int:
        """The fewest tokens a piece the tokenizer surely makes counts: one, or, longer than
        WordPiece spells (an ``[UNK]``, :meth:`_costs`), one per character. Counted as one,
        each of 2,000 lessons of 5,000 characters without a space was tokenized, and cut,
        only to be left out."""
        return len(piece) if len(piece) > self._longest_word else 1

    def surely_within(self, text: str, limit: int) -> bool:
        """Whether :meth:`count` of ``text`` is surely at most ``limit``, without tokenizing:
        true for ASCII text of at most ``limit`` characters (each token of it covers at least
        one character); false (not known) otherwise."""
        return self._bert and text.isascii() and len(text) <= limit

    def _costs(self, encoded: Any) -> list[int]:
        """What each token of ``encoded`` counts: 1, but an unknown one (``[UNK]``) one per
        character it stands for. WordPiece makes one ``[UNK]`` of any word it cannot spell
        and of every word longer than 100 characters, so 50,000 characters without a space
        (or a line of emoji, or of kana) counted as one token, and a briefing of 100 tokens
        held 70,000 characters."""
        unk = self._unk
        return [end - start if tid == unk and end - start > 1 else 1
                for tid, (start, end) in zip(encoded.ids, encoded.offsets, strict=True)]

    def count(self, text: str) -> int:
        got = self._counts.get(text)
        if got is None:
            got = sum(self._costs(self._tok.encode(text, add_special_tokens=False))) if text \
                else 0
            _remember(self._counts, text, got)
        return got

    def count_many(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        with self._lock:  # encode_batch uses the tokenizer's own thread pool
            encoded = self._tok.encode_batch(texts, add_special_tokens=False)
        return [sum(self._costs(e)) for e in encoded]

    def _longest_within(self, word: str, keep: int) -> int:
        """How many characters of ``word`` (one unknown token, which counts one a character)
        to keep so that they count at most ``keep`` tokens, the most found by bisection:
        ``keep`` of them always do (cut to 100 characters or fewer, WordPiece spells them in
        as many pieces at most), and a shorter cut may spell in fewer."""
        if keep >= min(len(word), self._longest_word):
            # past the longest word WordPiece spells, a cut of k characters counts k
            return min(keep, len(word))
        # lo fits; hi does not (past the longest word spelled, k characters count k > keep)
        lo, hi = keep, min(len(word), self._longest_word + 1)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.count(word[:mid]) <= keep:
                lo = mid
            else:
                hi = mid
        return lo

    def truncate(self, text: str, limit: int, marker: str = " …") -> str:
        """``text`` cut at a token boundary (inside an unknown token, at a character: it
        counts one a character) so that it, with ``marker``, fits ``limit`` tokens."""
        encoded = self._tok.encode(text, add_special_tokens=False)
        costs = self._costs(encoded)
        if sum(costs) <= limit:
            return text
        keep = max(0, limit - self.count(marker))
        end = 0
        for cost, (start, stop) in zip(costs, encoded.offsets, strict=True):
            if cost > keep:
                if cost > 1 and keep > 0:  # as much of an unknown word as ``keep`` allows
                    end = start + self._longest_within(text[start:stop], keep)
                break
            keep -= cost
            end = stop
        if end == 0:
            return ""
        return text[:end].rstrip() + marker


def _remember(table: dict[str, int], text: str, value: int) -> None:
    if len(text) <= MEMO_CHARS:
        if len(table) >= MEMO_ENTRIES:
            table.clear()
        table[text] = value


@cache
def default_counter() -> TokenCounter:
    """The counter over the vendored tokenizer (``everos_reflect/assets/minilm``)."""
    from tokenizers import Tokenizer

    from everos_reflect.embedding.local import default_tokenizer_path

    return TokenCounter(Tokenizer.from_file(str(default_tokenizer_path())))
