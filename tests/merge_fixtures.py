"""What the offline merge's rule tests share: the bundled embedder, one sentence as the merge
reads it, a narrative merged from a few one-line Episodes two days apart, one Episode of a
given day and a narrative's paragraphs."""

from __future__ import annotations

from datetime import UTC, date, datetime

from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.llm import extractive
from everos_reflect.llm.base import MergeMember, MergeRequest
from everos_reflect.llm.extractive import ExtractiveLLM, plain_sentences


def loaded_local() -> LocalEmbedder:
    """The bundled MiniLM on one thread (the rules are calibrated with it)."""
    embedder = LocalEmbedder(batch_size=16, threads=1)
    embedder.load()
    return embedder


def read_sentence(text: str) -> extractive._Sentence:
    """``text`` as the merge reads one sentence (whether past, passing, what it ends)."""
    return extractive._Sentence(text, date.min, 0)


def narrative(llm: ExtractiveLLM, *texts: str, subject: str = "Notes") -> str:
    """The narrative an initial merge writes of ``texts``, one Episode each, in order."""
    members = [MergeMember(f"ep_202611{10 + 2 * i}_0001",
                           datetime(2026, 11, 10 + 2 * i, 10, tzinfo=UTC), subject, text)
               for i, text in enumerate(texts)]
    return llm.merge(MergeRequest("init", members)).content


def member(day: str, content: str, n: int = 1, *, subject: str = "Notes") -> MergeMember:
    """The ``n``-th Episode of ``day`` (``YYYY-MM-DD``, at midnight UTC) as a merge reads it."""
    ts = datetime.fromisoformat(day).replace(tzinfo=UTC)
    return MergeMember(f"ep_{day.replace('-', '')}_{n:04d}", ts, subject, content)


def paragraphs(text: str) -> list[str]:
    """The paragraphs of a narrative (a dated line, or the current state), blank ones left out."""
    return [p for p in text.split("\n\n") if p]


def kept_both(local: LocalEmbedder, first: str, second: str) -> list[str]:
    """The narratives of ``first`` then ``second``, merged with the embedder and without it,
    each checked to keep both sentences as written (neither folded into the other): what a
    rule test then reads is whether, and how, the narrative states the current state."""
    contents = [narrative(llm, first, second) for llm in (ExtractiveLLM(local), ExtractiveLLM())]
    for content in contents:
        kept = plain_sentences(content)
        assert kept == [first, second], f"sentences kept: {kept}"
    return contents
