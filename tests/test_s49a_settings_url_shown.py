"""``settings`` shows a URL setting as every error shows one (``model.redacted_url``): the
values of its query string and fragment written ``***`` (some gateways take the key there:
``?api_key=…``), and its host as written. It masked only a password, so
``everos-reflect settings llm`` printed a key given in the query string in clear, and an IPv6
host lost its brackets (``me:***@::1:8080``, no URL at all)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli


def _base_url_shown(root: Path, url: str) -> tuple[str, str]:
    result = CliRunner().invoke(cli, ["settings", "llm", "--root", str(root), "--json"],
                                env={"EVEROS_LLM__BASE_URL": url})
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    [row] = [r for r in doc["sections"]["llm"] if r["key"] == "base_url"]
    text = CliRunner().invoke(cli, ["settings", "llm", "--root", str(root)],
                              env={"EVEROS_LLM__BASE_URL": url}).stdout
    return row["value"], text


@pytest.mark.parametrize(("url", "shown"), [
    ("https://gw.example/v1?api_key=sk-in-query", "https://gw.example/v1?api_key=***"),
    ("http://me:pw@[::1]:8080/v1", "http://me:***@[::1]:8080/v1"),
    ("http://me:pw@[::1]:8080/v1?key=sk-in-query&v=2#sk-frag",
     "http://me:***@[::1]:8080/v1?key=***&v=***#***"),
    ("http://me:pw@LLM.Local/v1", "http://me:***@LLM.Local/v1"),  # as written
    ("http://llm.local:8080/v1", "http://llm.local:8080/v1"),  # nothing to hide
])
def test_a_url_setting_is_shown_as_errors_show_it(root: Path, url: str, shown: str) -> None:
    (root / "everos.toml").write_text("", "utf-8")
    value, text = _base_url_shown(root, url)
    assert value == shown
    assert f'base_url = "{shown}"' in text
    for secret in ("sk-in-query", "sk-frag", ":pw@"):
        assert secret not in value and secret not in text
