"""Embedders: the hash fake, the bundled ONNX model, and the OpenAI-compatible client."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from everos_reflect.embedding import HashEmbedder, make_embedder
from everos_reflect.embedding.base import answer_waiting, pausing
from everos_reflect.embedding.local import (
    CallSlots,
    LocalEmbedder,
    default_model_path,
    default_tokenizer_path,
)
from everos_reflect.embedding.openai_embed import OpenAIEmbedder, max_reply_bytes
from everos_reflect.errors import ProviderUnavailable
from everos_reflect.settings import EmbeddingSettings
from tests.waiting import wait_for


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


# -- HashEmbedder --------------------------------------------------------------------------


def test_hash_embedder_returns_unit_float32_rows() -> None:
    vectors = HashEmbedder(32).embed(["a dog", "", "!!!", "tax return due"])
    assert vectors.shape == (4, 32)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)


def test_hash_embedder_is_deterministic_across_instances() -> None:
    texts = ["Andrew adopted Toby", "Buddy is his second dog"]
    np.testing.assert_array_equal(HashEmbedder().embed(texts), HashEmbedder().embed(texts))


def test_hash_embedder_similarity_follows_shared_words() -> None:
    dog, dog2, tax = HashEmbedder().embed(
        ["Andrew adopted a dog named Toby", "the dog Toby was adopted by Andrew", "tax return"]
    )
    assert cos(dog, dog2) > 0.5
    assert cos(dog, dog2) > cos(dog, tax) + 0.3


def test_hash_embedder_of_no_texts_is_empty() -> None:
    assert HashEmbedder(16).embed([]).shape == (0, 16)


def test_make_embedder_picks_provider_from_settings() -> None:
    assert make_embedder(EmbeddingSettings(provider="hash", dimensions=48)).dim == 48
    local = make_embedder(EmbeddingSettings(provider="local", batch_size=8, threads=1))
    assert isinstance(local, LocalEmbedder)
    assert (local.batch_size, local.threads, local.dim) == (8, 1, 384)
    with pytest.raises(ProviderUnavailable, match="unknown \\[embedding\\] provider"):
        make_embedder(EmbeddingSettings(provider="word2vec"))


# -- LocalEmbedder (real model) -------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    embedder = LocalEmbedder(batch_size=4, threads=1)
    embedder.load()
    return embedder


def test_local_embedder_shape_norm_and_name(local: LocalEmbedder) -> None:
    vectors = local.embed(["hello", ""])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert local.name == "local:all-MiniLM-L6-v2-int8"
    assert local.embed([]).shape == (0, 384)


def test_local_embedder_threads_sleep_instead_of_spinning(local: LocalEmbedder) -> None:
    local.load()
    options = local._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_local_embedder_is_semantically_sane(local: LocalEmbedder) -> None:
    dog, puppy, tax = local.embed(["I adopted a dog", "my new puppy", "tax return"])
    assert cos(dog, puppy) > cos(dog, tax) + 0.3


def test_local_embedder_batching_and_length_sorting_do_not_change_vectors(
    local: LocalEmbedder,
) -> None:
    texts = [
        "a much longer sentence about a weekend at the beach with the whole family " * 3,
        "short",
        "Caroline went to an LGBTQ support group",
        "x",
        "Melanie painted a sunrise over the lake last year",
        "",
    ]
    together = local.embed(texts)
    alone = np.stack([local.embed([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-4)
    np.testing.assert_array_equal(local.embed(texts), together)


def test_local_embedder_keeps_no_copy_of_the_serialized_model(local: LocalEmbedder) -> None:
    # onnxruntime's Python session keeps the bytes it was built from (22 MB) unless told not
    # to; the native session has its own weights, so embedding works without them
    session = local._session
    big = [k for k, v in vars(session).items() if isinstance(v, bytes) and len(v) > 1 << 20]
    assert big == []
    assert local.embed(["still works"]).shape == (1, 384)


def test_local_embedder_truncates_long_text(local: LocalEmbedder) -> None:
    long_text = "memory " * 2000
    assert local.embed([long_text]).shape == (1, 384)


def test_local_embedder_rejects_tampered_tokenizer(tmp_path: Path) -> None:
    tampered = tmp_path / "tokenizer.json"
    shutil.copyfile(default_tokenizer_path(), tampered)
    with tampered.open("a") as fh:
        fh.write(" ")
    embedder = LocalEmbedder(tokenizer_path=tampered)
    with pytest.raises(ProviderUnavailable, match=r"embedding tokenizer .* has sha256"):
        embedder.embed(["hello"])


def test_local_embedder_rejects_tampered_model(tmp_path: Path) -> None:
    tampered = tmp_path / "model.onnx"
    data = bytearray(default_model_path().read_bytes())
    data[-1] ^= 0xFF
    tampered.write_bytes(bytes(data))
    with pytest.raises(ProviderUnavailable, match=r"embedding model .* expected 8199be6f"):
        LocalEmbedder(model_path=tampered).load()


def test_local_embedder_loads_once_under_concurrent_first_use() -> None:
    embedder = LocalEmbedder(threads=1)
    results: list[np.ndarray] = []

    def work() -> None:
        results.append(embedder.embed(["concurrent first use"]))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3
    np.testing.assert_allclose(results[0], results[2], atol=1e-6)


class _CountingSession:
    """The real onnxruntime session, counting how many of its calls run at once."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.lock = threading.Lock()
        self.running = self.most = self.calls = 0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.005)  # a real call takes longer: give the others time to pile in
            return self.session.run(*args, **kwargs)
        finally:
            with self.lock:
                self.running -= 1


def _embed_from_threads(embedder: LocalEmbedder, texts: list[str],
                        threads: int) -> list[np.ndarray]:
    results: list[np.ndarray] = [np.empty(0)] * threads
    start = threading.Barrier(threads)

    def work(i: int) -> None:
        start.wait()
        results[i] = embedder.embed(texts)

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return results


@pytest.mark.parametrize("calls_at_once", [1, 2])
def test_local_embedder_runs_at_most_calls_at_once_model_calls(calls_at_once: int) -> None:
    # six threads embedding at once, as a Reflection run with the extractive provider does
    # (four merge workers, the guard, the commit): their calls' working memory adds up
    embedder = LocalEmbedder(batch_size=2, threads=1, calls_at_once=calls_at_once)
    embedder.load()
    counting = _CountingSession(embedder._session)
    embedder._session = counting
    texts = [f"sentence number {i} about the weekend at the lake" for i in range(8)]
    results = _embed_from_threads(embedder, texts, 6)
    assert counting.calls == 6 * 4  # batches of 2: every call went through the count
    assert counting.most == calls_at_once  # never more, and the limit is really reached
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])


class _GatedSession:
    """The real session; the first call waits for ``go``, and every call notes its thread."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.order: list[str] = []
        self.go = threading.Event()

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.order.append(threading.current_thread().name)
        if len(self.order) == 1:
            assert self.go.wait(30)
        return self.session.run(*args, **kwargs)


def test_a_call_someone_waits_for_takes_the_next_free_slot() -> None:
    """An add's sentence (or a search's query) queued among a Reflection's batches for any
    free slot: 0.5 s on average, up to 2 s, of an add during a LoCoMo run. It goes first."""
    embedder = LocalEmbedder(batch_size=1, threads=1, calls_at_once=1)
    embedder.load()
    gated = _GatedSession(embedder._session)
    embedder._session = gated

    def background(text: str) -> None:
        embedder.embed([text])

    def answering() -> None:
        with answer_waiting():
            embedder.embed(["what did Andrew adopt"])

    first = threading.Thread(target=background, args=("the first batch",), name="first")
    first.start()
    assert wait_for(lambda: gated.order == ["first"])  # it holds the only slot
    later = threading.Thread(target=background, args=("a later batch",), name="background")
    later.start()
    assert wait_for(lambda: len(embedder._calls._cond._waiters) == 1)
    answer = threading.Thread(target=answering, name="answer")
    answer.start()
    assert wait_for(lambda: len(embedder._calls._cond._waiters) == 2)
    gated.go.set()
    for thread in (first, later, answer):
        thread.join(30)
    assert gated.order == ["first", "answer", "background"]


def test_local_embedder_pauses_between_its_model_calls_only() -> None:
    """A sync lets a waiting add in at these pauses (:func:`pausing`): one between two model
    calls, none before the first or after the last."""
    embedder = LocalEmbedder(batch_size=2, threads=1)
    pauses: list[int] = []
    with pausing(lambda: pauses.append(1)):
        embedder.embed([f"sentence {i} about the lake" for i in range(5)])  # calls of 2, 2, 1
        assert len(pauses) == 2
        embedder.embed(["one sentence"])
    assert len(pauses) == 2
    embedder.embed([f"sentence {i}" for i in range(5)])  # no sync asked for pauses
    assert len(pauses) == 2


def test_call_slots_let_the_others_go_once_no_urgent_call_waits() -> None:
    """A background call that waited only because an urgent one did goes as soon as that one
    has its slot (a free slot stays usable)."""
    slots = CallSlots(2)
    with slots.held(urgent=True):
        got = threading.Event()

        def background() -> None:
            with slots.held(urgent=False):
                got.set()

        thread = threading.Thread(target=background)
        thread.start()
        assert got.wait(30)  # one slot was free and nobody urgent waited
        thread.join(30)


def test_local_embedder_refuses_no_calls_at_once() -> None:
    with pytest.raises(ValueError, match="calls_at_once"):
        LocalEmbedder(calls_at_once=0)


# -- OpenAIEmbedder against a local fake server ---------------------------------------------


class FakeEmbeddings:
    """A tiny ``/v1/embeddings`` server; ``reply`` decides the answer to each request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self.dim = 8
        self.malformed = False
        self.status = 200  # anything else: answered with that status and a 1 ms Retry-After
        self.trickle = 0.0  # seconds between the reply's bytes, sent one at a time
        self.padding = 0  # characters of an extra key in each reply
        self.indexes: list[int] | None = None  # the "index" of each vector, in order
        self.scale = 1.0  # multiplies every vector's components
        self.error = ""  # the error message of a non-200 answer (none: an empty body)
        self.raw: bytes | None = None  # the body of a 200 answer, sent as it is
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                fake.auth.append(self.headers.get("Authorization"))
                if self.path != "/v1/embeddings":
                    self.send_response(404)
                    self.end_headers()
                    return
                if fake.status != 200:
                    error = json.dumps({"error": {"message": fake.error}}).encode() \
                        if fake.error else b""
                    self.send_response(fake.status)
                    self.send_header("Retry-After-Ms", "1")  # the openai client's retry pause
                    self.send_header("Content-Length", str(len(error)))
                    self.end_headers()
                    self.wfile.write(error)
                    return
                if fake.raw is not None:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(fake.raw)))
                    self.end_headers()
                    self.wfile.write(fake.raw)
                    return
                if fake.malformed:
                    payload: dict[str, Any] = {"object": "list", "nonsense": True}
                else:
                    data = []
                    # reversed on purpose: clients must order by "index"
                    for i, text in reversed(list(enumerate(body["input"]))):
                        vec = [fake.scale * c for c in [len(text) + 1.0] + [1.0] * (fake.dim - 1)]
                        data.append({"object": "embedding", "index": i, "embedding": vec})
                    payload = {
                        "object": "list",
                        "data": data,
                        "model": body["model"],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    }
                    if fake.indexes is not None:
                        for item, index in zip(data, fake.indexes, strict=True):
                            item["index"] = index
                    if fake.padding:
                        payload["padding"] = "x" * fake.padding
                raw = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                if not fake.trickle:
                    self.wfile.write(raw)
                    return
                for i in range(len(raw)):
                    try:
                        self.wfile.write(raw[i : i + 1])
                        self.wfile.flush()
                    except OSError:  # the client gave up
                        return
                    time.sleep(fake.trickle)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        # shutdown() waits for the loop's next poll: 0.5 s by default, at every test's end
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_server() -> Iterator[FakeEmbeddings]:
    fake = FakeEmbeddings()
    yield fake
    fake.close()


def remote(fake: FakeEmbeddings, **kwargs: Any) -> OpenAIEmbedder:
    options: dict[str, Any] = {
        "model": "text-embedding-3-small",
        "dimensions": 8,
        "base_url": fake.url,
        "api_key": "sk-test",
        "batch_size": 2,
        "timeout": 5.0,
        "retries": 0,
    }
    options.update(kwargs)
    return OpenAIEmbedder(**options)


def test_openai_embedder_sends_batched_requests_and_normalises(
    fake_server: FakeEmbeddings,
) -> None:
    vectors = remote(fake_server).embed(["a", "bbb", ""])
    assert fake_server.requests == [
        {
            "model": "text-embedding-3-small",
            "input": ["a", "bbb"],
            "encoding_format": "float",
            "dimensions": 8,
        },
        {
            "model": "text-embedding-3-small",
            "input": [" "],
            "encoding_format": "float",
            "dimensions": 8,
        },
    ]
    assert fake_server.auth == ["Bearer sk-test", "Bearer sk-test"]
    assert vectors.shape == (3, 8)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    # order restored from "index": the first component grows with the text length
    assert vectors[1, 0] > vectors[0, 0]


def test_openai_embedder_pauses_between_two_requests(fake_server: FakeEmbeddings) -> None:
    """A sync lets a waiting add in between two requests of one call (:func:`pausing`)."""
    seen: list[int] = []
    with pausing(lambda: seen.append(len(fake_server.requests))):
        remote(fake_server).embed(["a", "bb", "ccc", "dddd", "e"])  # requests of 2, 2, 1
    assert seen == [1, 2]


def test_openai_embedder_rejects_wrong_dimension(fake_server: FakeEmbeddings) -> None:
    fake_server.dim = 4
    with pytest.raises(ProviderUnavailable, match=r"shape \(1, 4\), expected \(1, 8\)"):
        remote(fake_server).embed(["hello"])


def test_openai_embedder_rejects_malformed_reply(fake_server: FakeEmbeddings) -> None:
    fake_server.malformed = True
    with pytest.raises(ProviderUnavailable, match=r"embedding reply from .* is no list of "
                                                  r"embeddings \(its 'data' is null\)"):
        remote(fake_server).embed(["hello"])


def _vector(index: object, embedding: object) -> dict[str, Any]:
    return {"object": "embedding", "index": index, "embedding": embedding}


@pytest.mark.parametrize(("body", "said"), [
    (b"null", "is no list of embeddings (its 'data' is null): check [embedding] base_url"),
    (b"[]", "is no list of embeddings (its 'data' is null)"),
    (json.dumps({"object": "list", "data": {"0": [1.0] * 8}}).encode(),
     "is no list of embeddings"),
    (b"<html><body>502 Bad Gateway</body></html>",
     "failed: the response body is not JSON (Expecting value at char 0)"),
    (json.dumps({"data": []}).encode(), "gives 0 vectors for 1 text"),
    (json.dumps({"data": [_vector(0, "AAAAAA==")]}).encode(),
     ": vector 1 of 1 is str, not a list of numbers"),
    (json.dumps({"data": [_vector(0, None)]}).encode(),
     ": vector 1 of 1 is null, not a list of numbers"),
    (json.dumps({"data": [_vector("0", [1.0] * 8)]}).encode(),
     "gives a vector without a whole-number 'index': indexes ['0']"),
    (json.dumps({"data": [_vector(0, [1.0] * 7 + ["x"])]}).encode(),
     "holds vectors that are not lists of numbers of one length"),
])
def test_a_reply_of_the_wrong_shape_is_refused_saying_what_is_wrong(
        fake_server: FakeEmbeddings, body: bytes, said: str) -> None:
    # The SDK builds the reply unchecked: a server answering null, an HTML page or vectors
    # as text failed with "'NoneType' object is not iterable", "Expecting value: line 1
    # column 1 (char 0)" or "could not convert string to float", naming nothing.
    fake_server.raw = body
    with pytest.raises(ProviderUnavailable) as caught:
        remote(fake_server).embed(["hello"])
    assert said in str(caught.value)


def test_openai_embedder_times_out_on_a_trickling_reply(fake_server: FakeEmbeddings) -> None:
    # Every byte came within the per-read timeout, so the call lasted as long as the server
    # kept trickling (here ~10 s for a 0.5 s timeout; unbounded in general).
    fake_server.trickle = 0.05
    embedder = OpenAIEmbedder(model="m", dimensions=8, base_url=fake_server.url,
                              timeout=0.5, retries=0)
    with pytest.raises(ProviderUnavailable, match="timed out"):
        embedder.embed(["hello"])


def test_openai_embedder_refuses_a_reply_past_its_size_bound(
        fake_server: FakeEmbeddings) -> None:
    # The reply was read whole, however large (a lying or broken server's endless body
    # filled the memory), before its shape was checked; it is cut off past a bound made
    # from the batch and the vector size, which a real reply never reaches.
    bound = max_reply_bytes(2, 8)
    fake_server.padding = bound - 4096
    assert remote(fake_server).embed(["a", "b"]).shape == (2, 8)
    fake_server.padding = bound + 1
    with pytest.raises(ProviderUnavailable) as caught:
        remote(fake_server).embed(["a", "b"])
    assert str(caught.value) == (f"embedding request to {fake_server.url} failed: response "
                                 f"larger than {bound:,} bytes")


@pytest.mark.parametrize("indexes", [[0, 0], [1, 1], [0, 2], [-1, 0]])
def test_openai_embedder_refuses_a_reply_not_giving_each_text_its_vector_once(
        fake_server: FakeEmbeddings, indexes: list[int]) -> None:
    # Only "index" says which vector is which text's: a repeated or skipped one was sorted
    # as it came and the texts took each other's vectors, silently.
    fake_server.indexes = indexes
    with pytest.raises(ProviderUnavailable) as caught:
        remote(fake_server).embed(["a", "bbb"])
    assert str(caught.value) == (f"embedding reply from {fake_server.url} does not give each "
                                 f"of the 2 texts its vector once: indexes {sorted(indexes)}")


@pytest.mark.parametrize("scale", [1e19, 1e38, 1e-30, 0.0, float("nan")])
def test_openai_embedder_refuses_a_vector_whose_length_is_zero_or_out_of_range(
        fake_server: FakeEmbeddings, scale: float) -> None:
    # Components of 1e19 and up are finite, but the vector's length overflowed float32 to
    # inf: the check let it through and normalizing made it all zeros, in the index and every
    # cluster, as if the server had said nothing about the text.
    fake_server.scale = scale
    with pytest.raises(ProviderUnavailable, match=r"holds zero, non-finite or out-of-range "
                                                  r"vectors \(vector 1 of 2 in this reply: "):
        remote(fake_server).embed(["a", "bbb"])
    fake_server.scale = 1e18  # large, but its length is in range: normalized as usual
    np.testing.assert_allclose(np.linalg.norm(remote(fake_server).embed(["a", "bbb"]), axis=1),
                               1.0, rtol=1e-6)


@pytest.mark.parametrize("status", [500, 400])
def test_an_embedding_failure_clips_a_huge_error_text(fake_server: FakeEmbeddings,
                                                      status: int) -> None:
    # A server's 1 MB error text went whole into the failure, and from there into the log
    # line, the run record and the API's answer (as the LLM's failures no longer do).
    fake_server.status, fake_server.error = status, "x" * 1_000_000
    with pytest.raises(ProviderUnavailable) as caught:
        remote(fake_server).embed(["hello"])
    message = str(caught.value)
    assert len(message) < 1_000 and "characters)" in message, message[:200]
    assert f"Error code: {status}" in message


def test_openai_embedder_reports_unreachable_server() -> None:
    embedder = OpenAIEmbedder(
        model="m", dimensions=8, base_url="http://127.0.0.1:9/v1", timeout=2.0, retries=0
    )
    with pytest.raises(ProviderUnavailable, match=r"127\.0\.0\.1:9"):
        embedder.embed(["hello"])


def test_an_embedding_failure_never_shows_the_credentials_of_base_url(
    fake_server: FakeEmbeddings,
) -> None:
    fake_server.status = 503
    url = fake_server.url.replace("://", "://alice:s3cr3t@", 1)
    with pytest.raises(ProviderUnavailable) as caught:
        remote(fake_server, base_url=url).embed(["hello"])
    message = str(caught.value)
    assert "s3cr3t" not in message and "alice" not in message
    assert "://***@127.0.0.1" in message, message


@pytest.mark.parametrize("retries", [0, 2])
def test_embedding_retries_and_timeout_come_from_the_config(
    fake_server: FakeEmbeddings, retries: int
) -> None:
    # make_embedder read keys EmbeddingSettings did not have, so every remote embedder took
    # 2 retries and a 30 s timeout whatever the config said.
    fake_server.status = 503
    settings = EmbeddingSettings(provider="openai", model="m", dimensions=8,
                                 base_url=fake_server.url, timeout_seconds=4.5,
                                 max_retries=retries)
    embedder = make_embedder(settings)
    assert isinstance(embedder, OpenAIEmbedder) and embedder.timeout == 4.5
    with pytest.raises(ProviderUnavailable, match="503"):
        embedder.embed(["hello"])
    assert len(fake_server.requests) == 1 + retries


def test_openai_embedder_name_records_model_and_size(fake_server: FakeEmbeddings) -> None:
    assert remote(fake_server).name == "openai:text-embedding-3-small:8"


class _Counting:
    name, dim = "counting", 8

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.inner = HashEmbedder(8)

    def embed(self, texts: list[str]) -> np.ndarray:
        self.seen.extend(texts)
        return self.inner.embed(texts)


def test_caching_embedder_embeds_each_text_once_and_forgets_the_oldest() -> None:
    from everos_reflect.embedding import CachingEmbedder

    inner = _Counting()
    cached = CachingEmbedder(inner, max_entries=2)
    first = cached.embed(["a dog", "a cat", "a dog"])
    assert inner.seen == ["a dog", "a cat"]  # duplicates in one call are embedded once
    np.testing.assert_array_equal(first, inner.inner.embed(["a dog", "a cat", "a dog"]))
    again = cached.embed(["a cat"])
    assert inner.seen == ["a dog", "a cat"] and cached.hits == 1
    np.testing.assert_array_equal(again[0], first[1])
    cached.embed(["a bird"])  # evicts "a dog", the least recently used
    cached.embed(["a dog"])
    assert inner.seen == ["a dog", "a cat", "a bird", "a dog"]
    assert cached.name == "counting" and cached.dim == 8


def test_search_queries_get_a_cache_of_their_own_and_keep_documents_cached() -> None:
    from everos_reflect.embedding import CachingEmbedder
    from everos_reflect.embedding.base import embed_query

    inner = _Counting()
    cached = CachingEmbedder(inner, max_entries=2, query_entries=2)
    cached.embed(["a fact", "another fact"])
    np.testing.assert_array_equal(embed_query(cached, "a fact"), inner.inner.embed(["a fact"])[0])
    for query in ("q1", "q2", "q3", "q2"):  # q1 falls out of the query cache; q2 is a hit
        np.testing.assert_array_equal(embed_query(cached, query), inner.inner.embed([query])[0])
    assert inner.seen == ["a fact", "another fact", "q1", "q2", "q3"]
    cached.embed(["a fact", "another fact"])  # the queries pushed no document out
    embed_query(cached, "q1")
    assert inner.seen[5:] == ["q1"] and len(cached._cache) == 2 and len(cached._queries) == 2
    # a returned vector is the caller's to change
    embed_query(cached, "q1")[:] = 0
    assert embed_query(cached, "q1").any()


def test_embed_query_on_a_plain_embedder_is_one_call() -> None:
    from everos_reflect.embedding.base import embed_query

    inner = _Counting()
    np.testing.assert_array_equal(embed_query(inner, "q"), inner.inner.embed(["q"])[0])
    assert inner.seen == ["q"]


def test_local_batches_shrink_for_long_texts_and_cover_every_text() -> None:
    from everos_reflect.embedding.local import MAX_BATCH_CELLS, LocalEmbedder

    emb = LocalEmbedder(batch_size=32)
    lengths = np.array([3, 256, 40, 130, 256, 7, 90, 200] * 20)
    order = np.argsort(lengths, kind="stable")
    batches = emb._batches(order, lengths)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
    for batch in batches:
        width = int(lengths[batch].max())
        assert len(batch) <= 32
        assert len(batch) == 1 or len(batch) * width * width <= MAX_BATCH_CELLS
    assert max(len(b) for b in batches) == 32 and min(len(b) for b in batches) < 10
