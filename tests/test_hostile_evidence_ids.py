"""A derived record's evidence holding text that is no entry id (a typo, a user id)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.markdown.parser import parse_log
from tests.test_provenance import DEV, edit_file, setup

INSIGHT = ("---\ntype: insight_daily\nschema_version: 1\nuser_id: u_andrew\n"
           "date: '2026-10-12'\n---\n<!-- entry:in_20261012_0001 -->\n---\n"
           "owner_id: u_andrew\ntimestamp: 2026-10-12T02:00:00+00:00\n"
           "evidence: {evidence}\ndepth: 1\nstatus: active\n---\n## Insight\nHe likes dogs.\n"
           "<!-- /entry:in_20261012_0001 -->\n")


def test_evidence_holding_no_entry_id_is_a_warning_naming_it() -> None:
    # cited as if deleted ("(deleted)" in explain, its record stale) and lint said nothing
    for written, odd in (("[ep_20261010_0001, u_andrew]", "'u_andrew'"),
                         ("[ep_2026101_0001]", "'ep_2026101_0001'"),
                         ("[ep_20260230_0001]", "'ep_20260230_0001'")):
        log = parse_log(INSIGHT.format(evidence=written), "insight-2026-10-12.md")
        assert [e.id for e in log.entries] == ["in_20261012_0001"]  # still read
        assert [(d.severity, d.message) for d in log.diagnostics] == [
            ("warning", f"entry in_20261012_0001: evidence holds {odd}, which is no entry id "
                        "(e.g. ep_20261012_0001): it cites nothing")]
    clean = parse_log(INSIGHT.format(evidence="[ep_20261010_0001]"), "insight-2026-10-12.md")
    assert clean.diagnostics == []


def test_explain_calls_a_cited_text_that_is_no_id_so_not_a_deleted_entry(root: Path) -> None:
    rt, eps, first, _second = setup(root)
    edit_file(rt.store.path_for_id(DEV, first.id), f"evidence: [{eps[0].id},",
              f"evidence: [{eps[0].id}, u_dev_typo,")
    rt.close()
    runner = CliRunner()
    args = ["explain", first.id, "--user", DEV.user_id, "--root", str(root)]
    tree = json.loads(runner.invoke(cli, [*args, "--json"]).stdout)
    odd = next(n for n in tree["evidence"] if n["id"] == "u_dev_typo")
    assert odd["missing"] is True and odd["not_an_id"] is True
    text = runner.invoke(cli, args)
    assert text.exit_code == 0, text.output
    assert "  u_dev_typo  (not an entry id: it cites nothing)" in text.output
    assert "(deleted)" not in text.output
