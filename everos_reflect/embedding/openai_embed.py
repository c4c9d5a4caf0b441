"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, Ollama, ...).

Replies are checked strictly — one vector per input, each of the configured size, finite — and
anything else is a :class:`ProviderUnavailable`, so a misconfigured server can never put vectors
of the wrong space into the index.
"""

from __future__ import annotations

import math
import os
import threading
from typing import Any

import numpy as np

from everos_reflect.embedding.base import is_answer_waiting, l2_normalize, pause_point
from everos_reflect.errors import ProviderUnavailable, clipped
from everos_reflect.model import quoted_value, redacted_url
from everos_reflect.problem_words import counted

# Models with a fixed size that reject the ``dimensions`` request parameter.
_FIXED_SIZE_MODELS = frozenset({"text-embedding-ada-002"})

#: Bytes of a reply's JSON one vector component may take (a float written out, pretty-printed
#: on a line of its own, is about 30), and what a reply may add around its vectors. A lying or
#: broken server's reply was read whole, however large, before its shape was checked.
_BYTES_PER_COMPONENT = 64
_BYTES_PER_VECTOR = 4096
_BYTES_PER_REPLY = 1 << 20
#: The shortest vector that normalizes exactly in float32: its squared length is a normal
#: float32 (a subnormal one loses precision, a zero one has no direction).
_MIN_LENGTH = float(np.sqrt(np.finfo(np.float32).tiny))


def max_reply_bytes(batch_size: int, dim: int) -> int:
    """The most bytes one reply for ``batch_size`` texts of ``dim`` components may hold."""
    return _BYTES_PER_REPLY + batch_size * (dim * _BYTES_PER_COMPONENT + _BYTES_PER_VECTOR)


class OpenAIEmbedder:
    """Batched, retried (by the ``openai`` client), timeout-bounded remote embeddings."""

    def __init__(
        self,
        *,
        model: str,
        dimensions: int,
        base_url: str | None = None,
        api_key: str | None = None,
        batch_size: int = 32,
        timeout: float = 30.0,
        retries: int = 2,
    ) -> None:
        if not model:
            raise ProviderUnavailable("[embedding] model must name the remote embedding model")
        if not dimensions or dimensions < 1:
            raise ProviderUnavailable("[embedding] dimensions must be the model's vector size")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model = model
        self.dim = int(dimensions)
        self.name = f"openai:{model}:{self.dim}"
        self.base_url = base_url or None
        # Local servers usually want no key, but the client insists on one.
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or "no-key"
        self.batch_size = batch_size
        self.timeout = timeout
        self.retries = retries
        self._clients: dict[bool, Any] = {}
        self._lock = threading.Lock()

    def _get_client(self, *, once: bool = False) -> Any:
        """The client of this embedder; ``once``: its twin without retries, for an answer
        someone waits on (:func:`~everos_reflect.embedding.base.answer_waiting`). The SDK
        sleeps for a 429's Retry-After (up to a minute or two) before each retry."""
        with self._lock:
            if self._clients.get(once) is None:
                import openai

                from everos_reflect.http_deadline import deadline_http_client

                self._clients[once] = openai.OpenAI(
                    api_key=self._api_key,
                    base_url=self.base_url,
                    timeout=self.timeout,
                    max_retries=0 if once else self.retries,
                    # bounds each whole reply: a trickling server would hold indexing, and
                    # an endless one fill the memory
                    http_client=deadline_http_client(
                        self.timeout, max_bytes=max_reply_bytes(self.batch_size, self.dim)),
                )
            return self._clients[once]

    def _request(self, texts: list[str]) -> np.ndarray:
        kwargs: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.model not in _FIXED_SIZE_MODELS:
            kwargs["dimensions"] = self.dim
        where = redacted_url(self.base_url) if self.base_url else "the OpenAI API"
        once = is_answer_waiting() and self.retries > 0
        try:
            reply = self._get_client(once=once).embeddings.create(**kwargs)
        except Exception as exc:  # transport, HTTP status, or a body that is not JSON
            from everos_reflect.http_deadline import UnusableResponse

            # the SDK reports a reply cut off at max_bytes (or undecodable) as "Connection
            # error."
            why = exc.__cause__ if isinstance(exc.__cause__, UnusableResponse) else exc
            tried = " (tried once: a search, briefing or add does not wait for retries)" \
                if once else ""
            raise ProviderUnavailable(
                f"embedding request to {where} failed: {_server_said(why)}{tried}") from exc
        indexes, vectors = _vectors_of(reply, where)
        if indexes != list(range(len(texts))) and len(indexes) == len(texts):
            # which vector is which text's is said only by "index": one repeated or skipped
            # gave texts each other's vectors, silently, in the index and every cluster
            raise ProviderUnavailable(
                f"embedding reply from {where} does not give each of the {len(texts)} texts "
                f"its vector once: indexes {quoted_value(indexes)}")
        if len(indexes) != len(texts):
            raise ProviderUnavailable(
                f"embedding reply from {where} gives {counted(len(indexes), 'vector')} for "
                f"{counted(len(texts), 'text')}")
        if vectors.shape != (len(texts), self.dim):
            raise ProviderUnavailable(
                f"embedding reply from {where} has shape {vectors.shape}, expected "
                f"({len(texts)}, {self.dim}): check [embedding] model and dimensions"
            )
        with np.errstate(over="ignore", under="ignore"):  # an overflow is checked below
            lengths = np.linalg.norm(vectors, axis=1)  # as l2_normalize computes them
        usable = np.isfinite(vectors).all(axis=1) & (lengths >= _MIN_LENGTH) & np.isfinite(lengths)
        if not usable.all():
            # a length past float32's range (components of 1e19 and up) overflowed to inf,
            # passed the check, and normalizing turned the vector into zeros in the index
            bad = int(np.flatnonzero(~usable)[0])
            raise ProviderUnavailable(
                f"embedding reply from {where} holds zero, non-finite or out-of-range vectors "
                f"(vector {bad + 1} of {len(texts)} in this reply: length "
                f"{float(lengths[bad]):.3g})"
            )
        return vectors

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # An empty string is rejected by the OpenAI API; a single space embeds "nothing".
        clean = [str(t) if str(t).strip() else " " for t in texts]
        parts = []
        for start in range(0, len(clean), self.batch_size):
            if start:
                pause_point()  # an add someone waits for may go in between two requests
            parts.append(self._request(clean[start : start + self.batch_size]))
        return l2_normalize(np.concatenate(parts))


def _vectors_of(reply: Any, where: str) -> tuple[list[int], np.ndarray]:
    """A reply's ``index`` of each vector and the vectors, in ``index`` order. The SDK builds
    the reply without checking it: a server answering ``null``, ``{}`` or vectors as text
    failed with "'NoneType' object is not iterable" and the like, which said nothing of the
    server."""
    data = getattr(reply, "data", None)
    if not isinstance(data, list):
        raise ProviderUnavailable(
            f"embedding reply from {where} is no list of embeddings (its 'data' is "
            f"{_type_of(data)}): check [embedding] base_url")
    # an item that is no object (a number, a text) has no "index"; a text's is str.index
    indexes = [None if callable(i := getattr(item, "index", None)) else i for item in data]
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in indexes):
        raise ProviderUnavailable(
            f"embedding reply from {where} gives a vector without a whole-number 'index': "
            f"indexes {quoted_value(indexes)}")
    order = sorted(range(len(data)), key=lambda n: indexes[n])
    rows = [getattr(data[n], "embedding", None) for n in order]
    for n, row in enumerate(rows):
        if not isinstance(row, list):
            raise ProviderUnavailable(
                f"embedding reply from {where}: vector {n + 1} of {len(rows)} is "
                f"{_type_of(row)}, not a list of numbers")
    try:
        with np.errstate(over="ignore"):  # past float32's range: inf, refused by the caller
            vectors = np.asarray(rows, dtype=np.float32)
    except (ValueError, TypeError) as exc:  # a text among the numbers, rows of mixed lengths
        raise ProviderUnavailable(
            f"embedding reply from {where} holds vectors that are not lists of numbers of "
            f"one length ({clipped(str(exc), 200)})") from exc
    return [indexes[n] for n in order], vectors


def _type_of(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _server_said(exc: Exception) -> str:
    """A failed request as a person reads it: a rate limit by name, with the wait the server
    asked for, anything else as the SDK says it. Clipped: a server's 1 MB error text went
    whole into the failure, and from there into the log, the run record and the API's
    answer."""
    import json

    import openai

    if isinstance(exc, json.JSONDecodeError):  # a 200 whose body is an HTML page, say
        return f"the response body is not JSON ({exc.msg} at char {exc.pos})"
    if not isinstance(exc, openai.APIStatusError) or exc.status_code != 429:
        return clipped(str(exc))
    said = "rate limited (429)"
    from everos_reflect.http_deadline import retry_after_seconds

    wait = retry_after_seconds(exc.response.headers)
    if wait is not None:
        said += f", retry after {math.ceil(wait)} s"
    message = exc.body.get("message") if isinstance(exc.body, dict) else None
    return f"{said}: {clipped(message)}" if isinstance(message, str) and message.strip() \
        else said

