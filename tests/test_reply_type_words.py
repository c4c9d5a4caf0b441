"""A model's reply of the wrong shape is said in JSON's words in the run record and the audit
("'facts' must be a list, got a string"; "expected a JSON object, got an array"), as the API
says a request's: Python's type names ("got str", "got NoneType", "got list") reached people
reading ``runs`` and ``derivation_report``, who never wrote Python."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from everos_reflect.llm.openai_llm import _reply_object
from everos_reflect.llm.tasks import InvalidReply, list_field, text_field


def _completion(content: Any) -> SimpleNamespace:
    message = SimpleNamespace(content=content, refusal=None)
    return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")])


@pytest.mark.parametrize(("content", "said"), [
    ("[1, 2]", "expected a JSON object, got an array"),
    ('"just text"', "expected a JSON object, got a string"),
    (["a", "list"], "message content is an array, not text"),
])
def test_a_reply_that_is_no_object_is_said_in_json_words(content: Any, said: str) -> None:
    with pytest.raises(InvalidReply) as caught:
        _reply_object(_completion(content))
    assert str(caught.value) == said


@pytest.mark.parametrize(("obj", "said"), [
    ({"facts": "one fact"}, "'facts' must be a list, got a string"),
    ({"facts": None}, "'facts' must be a list, got null"),
    ({"facts": {"a": 1}}, "'facts' must be a list, got an object"),
])
def test_a_field_of_the_wrong_type_is_said_in_json_words(obj: dict[str, Any],
                                                          said: str) -> None:
    with pytest.raises(InvalidReply) as caught:
        list_field(obj, "facts")
    assert str(caught.value) == said


def test_a_text_field_of_the_wrong_type_is_said_in_json_words() -> None:
    with pytest.raises(InvalidReply) as caught:
        text_field({"title": 5}, "title")
    assert str(caught.value) == "'title' must be a string, got a number"
