"""A prompt override (``[strategies.<name>.prompts]`` in ``ome.toml``) is bounded: at most
20,000 characters, each placeholder used once. A 1 MB override (what fits in an ``ome.toml``,
itself at most 1 MiB) was accepted and sent with every call, and a template repeating
``$records`` copied every record of the call in at each use: the prompt grew with uses ×
records, not with what the call shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.engine.registry import validate_ome, validate_strategy_settings
from everos_reflect.errors import ConfigError
from everos_reflect.llm.prompts import DEFAULT_PROMPTS, Prompts
from everos_reflect.llm.tasks import Record, TaskRequest, get_task, render_messages
from everos_reflect.settings import parse_ome

FILE = "/r/ome.toml"
LESSONS_TEMPLATE = get_task("lessons").template


def only_problem(name: str, prompts: dict[str, str]) -> tuple[str, str, str]:
    with pytest.raises(ConfigError) as caught:
        validate_strategy_settings(name, {"prompts": prompts}, FILE)
    [problem] = caught.value.problems
    return problem


@pytest.mark.parametrize(("name", "key", "template"), [
    ("reflect_episodes", "merge_init", "Merge these. $episodes\n"),
    ("reflect_episodes", "system", "You consolidate memory.\n"),
    ("learn_lessons", "lessons", "Lessons for $task_type: $records\n"),
    ("reflect_insights", "insights", "$records $question $count\n"),
])
def test_an_override_of_a_million_characters_is_refused_naming_its_size(
        name: str, key: str, template: str) -> None:
    text = template + "x" * (1_000_000 - len(template))
    file, where, reason = only_problem(name, {key: text})
    assert (file, where) == (FILE, f"strategies.{name}.prompts")
    assert reason == (f"{key}: is 1,000,000 characters; a prompt override is at most 20,000")


def test_a_root_whose_ome_toml_holds_a_long_override_reports_the_file_and_key(
        tmp_path: Path) -> None:
    from everos_reflect.settings import load_ome

    body = "Lessons for $task_type: $records " + "x" * 1_000_000
    (tmp_path / "ome.toml").write_text(
        f'[strategies.learn_lessons.prompts]\nlessons = "{body}"\n')
    file = str(tmp_path / "ome.toml")
    with pytest.raises(ConfigError) as caught:
        validate_ome(load_ome(tmp_path), file)
    assert caught.value.problems == [(file, "strategies.learn_lessons.prompts",
                                      "lessons: is 1,000,033 characters; a prompt override is "
                                      "at most 20,000")]


def test_an_override_of_20000_characters_is_taken() -> None:
    text = "Lessons for $task_type: $records\n" + "x" * (20_000 - 33)
    assert len(text) == 20_000
    values = validate_strategy_settings("learn_lessons", {"prompts": {"lessons": text}}, FILE)
    assert values["prompts"] == {"lessons": text}


def test_a_lessons_template_repeating_records_is_refused_when_ome_toml_loads() -> None:
    hostile = "Lessons for $task_type: " + "$records " * 2_000
    text = f'[strategies.learn_lessons]\nenabled = true\nprompts = {{lessons = "{hostile}"}}\n'
    with pytest.raises(ConfigError) as caught:
        validate_ome(parse_ome(text, FILE), FILE)
    assert caught.value.problems == [(
        FILE, "strategies.learn_lessons.prompts",
        "lessons: uses $records (2,000 times); each placeholder may appear once (the data it "
        "stands for is sent once)")]


@pytest.mark.parametrize(("key", "text"), [
    ("merge_init", "$episodes then ${episodes} again"),
    ("extract_facts", "$text $language_rule $language_rule"),
])
def test_a_merge_template_repeating_a_placeholder_is_refused(key: str, text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Prompts.from_settings({"prompts": {key: text}})
    [(_, where, reason)] = caught.value.problems
    assert where == f"strategies.reflect_episodes.prompts.{key}"
    assert "each placeholder may appear once" in reason


def test_a_system_prompt_may_mention_dollar_words_twice() -> None:
    # the system prompt is sent as written, never filled in: "$USD" is text there
    text = "Amounts are in $USD. Keep $USD amounts as written."
    assert Prompts.from_settings({"prompts": {"system": text}}).system == text


def test_the_lessons_prompt_grows_with_the_records_once_not_with_uses_of_them() -> None:
    # every template a strategy can be given renders to at most its own length plus the
    # records block and values once: linear in what the call shows
    records = tuple(Record(f"tk_20261012_{n:04d}", "task", "t" * 1_000) for n in range(50))
    req = TaskRequest(records=records, values={"task_type": "deploy"})
    block = len(req.numbering.block())
    longest = "Lessons for $task_type: $records $language_rule\n"
    longest += "x" * (20_000 - len(longest))
    prompts = Prompts.from_settings({"prompts": {"lessons": longest}}, section="")
    rendered = render_messages(get_task("lessons"), req, prompts)[1]["content"]
    rule = DEFAULT_PROMPTS.language_rule()
    assert len(rendered) == len(longest) - len("$task_type$records$language_rule") + len(
        "deploy") + block + len(rule)
