"""Sentence-level provenance: which source Episodes each sentence of a narrative stands for.

A merged narrative lists every Episode it replaced in ``sources``, but one sentence of it often
carries only one or two of them — and one sentence may stand for several sources that said the
same thing in different words. Reflection records that per sentence, in the narrative's own
metadata, so it survives in the Markdown (the truth) and is read back from it::

    provenance:
      content: 3f9a0c1e2b7d        # text_hash prefix of the Content it describes
      sentences:                   # one line per sentence of the Content, in order
      - ep_20260810_0001
      - ep_20260910_0001 ep_20261010_0002

Ids are the original Episodes (an ``update`` resolves the old narrative's sentences through its
own provenance), separated by spaces. The ``content`` check makes a hand edit of the narrative
harmless: when the Content no longer matches, every sentence falls back to the entry-level
``sources`` (what a reader could claim without the record).

Pure logic: no I/O. :func:`provenance` is what ``explain``, the benchmark and callers use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from everos_reflect.llm.extractive import split_sentences
from everos_reflect.model import Entry, text_hash

PROVENANCE_KEY = "provenance"
HASH_CHARS = 12
#: Bounds on what a (possibly hand-edited or hostile) record may hold before it is ignored.
MAX_SENTENCES = 5000
MAX_IDS_PER_SENTENCE = 1000


@dataclass(frozen=True)
class SentenceSources:
    """One sentence of an entry and the source Episodes it stands for."""

    text: str
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Provenance:
    """An entry's sentences with their sources; ``recorded`` says whether they come from the
    stored per-sentence record (True) or the entry-level fallback (False)."""

    entry_id: str
    sentences: tuple[SentenceSources, ...]
    recorded: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.entry_id,
            "recorded": self.recorded,
            "sentences": [{"text": s.text, "sources": list(s.sources)} for s in self.sentences],
        }


def content_fingerprint(content: str) -> str:
    return text_hash(content)[:HASH_CHARS]


def provenance_meta(content: str, per_sentence: Sequence[Sequence[str]]) -> dict[str, Any]:
    """The metadata value to store with a narrative whose Content is ``content``.

    ``per_sentence`` must align with :func:`split_sentences` of ``content``.
    """
    sentences = split_sentences(content)
    if len(sentences) != len(per_sentence):
        raise ValueError(
            f"provenance has {len(per_sentence)} rows for {len(sentences)} sentences")
    return {
        "content": content_fingerprint(content),
        "sentences": [" ".join(dict.fromkeys(ids)) for ids in per_sentence],
    }


def _recorded(value: Any, content: str, n_sentences: int) -> list[tuple[str, ...]] | None:
    """The stored rows if they are well-formed and describe this very content, else None."""
    if not isinstance(value, Mapping):
        return None
    rows = value.get("sentences")
    if (str(value.get("content")) != content_fingerprint(content) or not isinstance(rows, list)
            or len(rows) != n_sentences or n_sentences > MAX_SENTENCES):
        return None
    out: list[tuple[str, ...]] = []
    for row in rows:
        if not isinstance(row, str):
            return None
        ids = tuple(row.split())
        if not ids or len(ids) > MAX_IDS_PER_SENTENCE:
            return None
        out.append(ids)
    return out


def edited_since_merge(entry: Entry) -> bool:
    """Whether ``entry``'s Content was changed after the merge that wrote it: its record
    names a Content fingerprint that no longer matches. False when there is no record (an
    Episode, a narrative from before records): nothing tells then."""
    value = entry.meta.get(PROVENANCE_KEY)
    return (isinstance(value, Mapping) and "content" in value
            and str(value["content"]) != content_fingerprint(entry.content))


def provenance(entry: Entry) -> Provenance:
    """Each sentence of ``entry``'s Content with the sources it stands for.

    An ordinary Episode stands for itself; a narrative with a valid record uses it; any other
    narrative credits every sentence to all of its ``sources``.
    """
    sentences = split_sentences(entry.content)
    rows = _recorded(entry.meta.get(PROVENANCE_KEY), entry.content, len(sentences))
    if rows is not None:
        pairs = [SentenceSources(t, ids) for t, ids in zip(sentences, rows, strict=True)]
        return Provenance(entry.id, tuple(pairs), True)
    fallback = tuple(entry.sources) or (entry.id,)
    return Provenance(entry.id, tuple(SentenceSources(t, fallback) for t in sentences), False)


__all__ = [
    "PROVENANCE_KEY",
    "Provenance",
    "SentenceSources",
    "content_fingerprint",
    "edited_since_merge",
    "provenance",
    "provenance_meta",
]
