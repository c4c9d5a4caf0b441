"""A config file's TOML syntax error that names a key names it in TOML's words: tomllib said
"Cannot overwrite a value" of a key set twice (naming none), "Cannot declare ('llm',) twice"
of a table declared twice (a Python tuple) and "Cannot mutate immutable namespace ('x',)" of
a key added to an inline table. The line is kept; everos.toml, ome.toml and fleet.toml
alike."""

from __future__ import annotations

import pytest

from everos_reflect.errors import ConfigError
from everos_reflect.fleet.config import parse_fleet
from everos_reflect.settings import load_settings, parse_ome

TWICE = "it, or a key it is under, already has a value (each key is set once)"


@pytest.mark.parametrize(("text", "line", "reason"), [
    ("[llm]\nmax_retries = 2\nmax_retries = 3\n", "line 3", f"cannot set max_retries: {TWICE}"),
    ("[llm]\nmax_retries = 2\n\n[llm]\nmodel = 'x'\n", "line 4",
     "the table [llm] is declared twice (each table's header is written once)"),
    ('[llm]\nmax_retries = 2\n[llm]\n', "line 3",
     "the table [llm] is declared twice (each table's header is written once)"),
    ("[clustering]\nthreshold = 0.5\n[clustering.threshold]\n", "line 3",
     "[clustering.threshold] names a key that already has a value (each key is set once)"),
    ("llm = {model = 'x'}\nllm.max_retries = 2\n", "line 2",
     "llm was written whole on one line (an inline table or an array): no key can be added "
     "to it after"),
    ('["a b"]\nx = 1\n["a b"]\n', "line 3",
     'the table ["a b"] is declared twice (each table\'s header is written once)'),
])
def test_everos_toml_names_the_key(root: object, text: str, line: str, reason: str) -> None:
    from pathlib import Path

    assert isinstance(root, Path)
    (root / "everos.toml").write_text(text, "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(root, env={})
    [(_, where, said)] = caught.value.problems
    assert (where, said) == (line, f"TOML syntax error: {reason}")
    assert "(" + "'" not in said and "Cannot" not in said


def test_ome_toml_names_the_key_too() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_ome("[strategies.reflect_episodes]\nenabled = true\nenabled = false\n",
                  "root/ome.toml")
    assert caught.value.problems == [("root/ome.toml", "line 3",
                                      f"TOML syntax error: cannot set enabled: {TWICE}")]


def test_fleet_toml_names_the_key_too() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_fleet('roots = ["a"]\nnum_cpus = 2\nnum_cpus = 3\n', "fleet.toml")
    assert caught.value.problems == [("fleet.toml", "line 3",
                                      f"TOML syntax error: cannot set num_cpus: {TWICE}")]
