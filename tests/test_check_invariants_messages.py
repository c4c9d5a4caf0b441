"""``check_invariants`` (tests/reflect_fixtures.py) says what is wrong, naming the entry: a live
narrative whose source no log holds failed with a bare ``KeyError: 'ep_…'``, which told the
reader of a failing crash test neither which narrative nor what was missing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from everos_reflect.llm.extractive import ExtractiveLLM
from tests.reflect_fixtures import ANDREW, check_invariants, make_runtime, run_reflection, seed_pets


def test_a_live_narrative_whose_source_is_gone_fails_with_a_message(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    first, *_ = seed_pets(rt)
    run_reflection(rt)
    path = rt.store.path_for_id(ANDREW, first.id)
    text = path.read_text("utf-8")
    block = re.compile(rf"<!-- entry:{first.id} -->.*?<!-- /entry:{first.id} -->\n", re.S)
    path.write_text(block.sub("", text), "utf-8")  # the source deleted by hand

    with pytest.raises(AssertionError, match=rf"names source {first.id}, which is in none"):
        check_invariants(rt)
