"""A daily log whose name ends in a space or a dot after ``.md`` ("episode-2026-10-12.md ",
what a script writing ``f"{name}.md "`` or a sync tool leaves, and invisible in a listing) is
read by nothing: its Episodes were in no index, search or merge, and ``lint`` and ``status``
said nothing of it. Now ``lint`` warns of it as of any misnamed log, saying what is at the
end of the name; the log itself is left as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.lint import lint_report

LOG = ("---\ntype: episode_daily\nschema_version: 1\nuser_id: u1\ndate: '2026-10-12'\n---\n"
       "<!-- entry:ep_20261012_0001 -->\n---\ntimestamp: 2026-10-12T09:00:00+00:00\n"
       "parent_type: memcell\n---\n## Subject\nCats\n\n## Content\nAnn has a cat.\n"
       "<!-- /entry:ep_20261012_0001 -->\n")


@pytest.mark.parametrize(("name", "end"), [
    ("episode-2026-10-12.md ", "a space"), ("episode-2026-10-12.md\t", "a tab"),
    ("episode-2026-10-12.md.", "a dot"), ("episode-2026-10-12.MD  ", "a space"),
    ("episode-2026-10-12.md\u00a0", "U+00A0 (NO-BREAK SPACE)")])
def test_lint_warns_of_a_log_whose_name_ends_past_md(root: Path, name: str, end: str) -> None:
    episodes = root / "default_app/default_project/users/u1/episodes"
    episodes.mkdir(parents=True)
    (episodes / name).write_text(LOG, "utf-8")

    report = lint_report(root)
    got = [(p["file"].rsplit("/", 1)[-1], p["message"], p["severity"])
           for p in report["problems"]]
    assert got == [(name, "not read: the episodes folder's logs are named "
                          f"episode-YYYY-MM-DD.md (this name ends in {end})", "warning")]
    assert (episodes / name).read_text("utf-8") == LOG  # left as it was

    status = CliRunner().invoke(cli, ["status", "--root", str(root), "--json"])
    warned = json.loads(status.stdout)["files_with_warnings"]
    assert [w["file"].rsplit("/", 1)[-1] for w in warned] == [name]
