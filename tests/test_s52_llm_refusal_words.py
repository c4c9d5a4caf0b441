"""What a model's refusal and a server's error text are quoted as: escaped and bounded as
every value quoted back is, with the length it had. A refusal was put in the failure raw (an
ESC of it reached the terminal through the warning of each attempt), one that was no text as
Python writes it ("model refused: {'why': 'policy'}", "model refused: True"), and a 1 MB error
text was said to be "(324 characters)": the length of its first cut, not its own."""

from __future__ import annotations

import json
import logging

import pytest

from everos_reflect.errors import ProviderUnavailable
from everos_reflect.llm.base import FactsRequest
from everos_reflect.llm.openai_llm import OpenAILLM
from tests.test_s51_edges_sent_as_is import answering  # noqa: F401  (a fixture)

Answering = tuple[list[tuple[bytes, str]], str]


def completion(message: dict[str, object]) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": message}]}).encode()


def failure(answering: Answering, body: bytes) -> str:  # noqa: F811
    replies, url = answering
    replies.append((body, "application/json"))
    llm = OpenAILLM(model="m", base_url=url, api_key="k", max_retries=0)
    with pytest.raises(ProviderUnavailable) as caught:
        llm.extract_facts(FactsRequest(text="Andrew walked Rex."))
    return str(caught.value)


@pytest.mark.parametrize(("refusal", "said"), [
    ("I can't help with that.", "model refused: \"I can't help with that.\""),
    ("no\x1b[2J", "model refused: 'no\\x1b[2J'"),
    ({"why": "policy"}, "model refused: (its refusal is an object: {\"why\": \"policy\"})"),
    (True, "model refused: (its refusal is a boolean: true)"),
])
def test_a_refusal_is_quoted_as_any_value_is(
        answering: Answering, refusal: object, said: str,  # noqa: F811
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    message = failure(answering, completion({"role": "assistant", "content": None,
                                             "refusal": refusal}))
    assert f"unusable reply: {said} (gave up after 1 attempt)" in message, message
    assert "\x1b" not in message and "\x1b" not in caplog.text


def test_a_long_refusal_says_its_own_length(answering: Answering) -> None:  # noqa: F811
    message = failure(answering, completion({"role": "assistant", "content": None,
                                             "refusal": "no " * 100_000}))
    assert "(300,000 characters)" in message, message
    assert len(message) < 400


def test_a_long_error_text_says_its_own_length(answering: Answering) -> None:  # noqa: F811
    body = json.dumps({"choices": [], "error": {"message": "x" * 1_000_000}}).encode()
    message = failure(answering, body)
    assert "the server answered 200 with an error: 'xxx" in message, message
    assert "(1,000,000 characters)" in message, message


def test_a_long_page_says_its_own_length(answering: Answering) -> None:  # noqa: F811
    replies, url = answering
    replies.append((b"<html>" + b"y" * 5000 + b"</html>", "text/html"))
    llm = OpenAILLM(model="m", base_url=url, api_key="k", max_retries=0)
    with pytest.raises(ProviderUnavailable) as caught:
        llm.extract_facts(FactsRequest(text="Andrew walked Rex."))
    assert "(5,013 characters)" in str(caught.value), str(caught.value)
