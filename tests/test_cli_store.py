"""CLI: init, add, lint, status, enable/disable — output, JSON, exit codes, one-line errors."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli import store_cmds
from everos_reflect.cli.store_cmds import set_enabled
from everos_reflect.errors import ConfigError
from everos_reflect.settings import everos_toml_template, packaged_text

USERS = Path("default_app/default_project/users")


@click.group()
def cli() -> None:
    """Only this module's commands, so the test does not depend on the other groups."""


for _command in store_cmds.COMMANDS:
    cli.add_command(_command)


pytestmark = pytest.mark.usefixtures("no_everos_env")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def one_json(result: Result) -> object:
    """stdout must be exactly one JSON document."""
    return json.loads(result.stdout)


def one_line_error(result: Result) -> str:
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    assert run("init", str(path)).exit_code == 0
    return path


def add(root: Path, *extra: str, user: str = "u1") -> Result:
    return run("add", "--root", str(root), "--user", user, *extra)


def write_log(root: Path, rel: str, text: str) -> Path:
    path = root / USERS / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


EPISODES = """---
type: episode_daily
schema_version: 1
user_id: u1
date: '2026-10-12'
deprecated_entries:
  ep_20261012_0001: ep_20261012_0002
  ep_20261012_0009: ep_20261012_0002
---
<!-- entry:ep_20261012_0001 -->
---
owner_id: u1
timestamp: 2026-10-12T09:00:00+00:00
parent_type: memcell
parent_id: s1
---
## Subject
Dog

## Content
Adopted a dog named Toby.
<!-- /entry:ep_20261012_0001 -->
<!-- entry:ep_20261012_0002 -->
---
owner_id: u1
timestamp: 2026-10-12T10:00:00+00:00
parent_type: cluster
parent_id: cl_1
---
## Subject
Pets

## Content
Has a dog named Toby.
<!-- /entry:ep_20261012_0002 -->
"""

FACTS = """---
type: atomic_fact_daily
schema_version: 1
user_id: u1
date: '2026-10-12'
---
<!-- entry:af_20261012_0001 -->
---
owner_id: u1
timestamp: 2026-10-12T10:00:00+00:00
parent_type: episode
parent_id: ep_20261012_0002
---
## Fact
Has a dog named Toby.
<!-- /entry:af_20261012_0001 -->
<!-- entry:af_20261012_0002 -->
---
owner_id: u1
timestamp: 2026-10-12T10:00:00+00:00
parent_type: episode
parent_id: ep_20261012_0077
---
## Fact
Orphan fact.
<!-- /entry:af_20261012_0002 -->
"""


# --- init -------------------------------------------------------------------------------------


def test_init_writes_commented_settings_and_the_ome_template(tmp_path: Path) -> None:
    target = tmp_path / "new" / "root"
    result = run("init", str(target), "--json")
    assert result.exit_code == 0, result.output
    doc = one_json(result)
    assert doc == {
        "root": str(target),
        "written": [str(target / "everos.toml"), str(target / "ome.toml")],
    }
    assert (target / "everos.toml").read_text() == everos_toml_template()
    assert tomllib.loads((target / "everos.toml").read_text()) == {}
    assert (target / "ome.toml").read_text() == packaged_text("ome.toml")


def test_init_ome_template_has_a_table_for_every_shipped_strategy() -> None:
    # reflect_insights and revalidate_insights were missing: a new root's ome.toml did not
    # show that insights exist, what starts them or how to turn them on
    from everos_reflect.engine import registry

    shipped = {name for name in registry.known_strategies() if type(
        registry.get_strategy(name)).__module__.startswith("everos_reflect.strategies.")}
    template = tomllib.loads(packaged_text("ome.toml"))
    assert set(template["strategies"]) == shipped
    # the template turns nothing on (`enable NAME` does), and every value it sets is valid
    assert [n for n, t in template["strategies"].items() if t["enabled"]] == []
    registry.validate_ome(template["strategies"], "ome.toml")


def test_init_refuses_to_overwrite_without_force(root: Path) -> None:
    (root / "ome.toml").write_text("# mine\n")
    line = one_line_error(run("init", str(root)))
    assert "refusing to overwrite" in line
    assert str(root / "everos.toml") in line and str(root / "ome.toml") in line
    assert (root / "ome.toml").read_text() == "# mine\n"

    assert run("init", str(root), "--force").exit_code == 0
    assert (root / "ome.toml").read_text() == packaged_text("ome.toml")


def test_init_uses_root_option_when_no_argument(tmp_path: Path) -> None:
    result = run("init", "--root", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "everos.toml").is_file()


def test_init_on_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    result = run("init", str(tmp_path / "f"))
    assert result.exit_code == 2  # a usage error, reported by click
    assert "is a file" in result.stderr
    assert not (tmp_path / "everos.toml").exists()


# --- enable / disable -------------------------------------------------------------------------


def test_enable_changes_only_the_enabled_line(root: Path) -> None:
    before = (root / "ome.toml").read_text()
    result = run("enable", "reflect_episodes", "--root", str(root))
    assert result.exit_code == 0, result.output
    assert "reflect_episodes enabled" in result.stdout
    after = (root / "ome.toml").read_text()
    assert after == before.replace("enabled = false", "enabled = true", 1)


def test_enable_writes_through_a_chain_of_symlinks_and_keeps_the_links(root: Path) -> None:
    # The atomic rename replaced the link with a regular file: the link was gone and its
    # target (the file the person actually keeps) still had the strategy off.
    shared = root / "config" / "ome.toml"
    shared.parent.mkdir()
    (root / "ome.toml").rename(shared)
    (root / "config" / "current.toml").symlink_to("ome.toml")
    (root / "ome.toml").symlink_to(Path("config/current.toml"))
    result = run("enable", "reflect_episodes", "--root", str(root))
    assert result.exit_code == 0, result.output
    assert (root / "ome.toml").is_symlink() and (root / "config" / "current.toml").is_symlink()
    assert tomllib.loads(shared.read_text())["strategies"]["reflect_episodes"]["enabled"]


def test_disable_refuses_a_symlinked_ome_toml_leading_outside_the_root(
    root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere.toml"
    (root / "ome.toml").rename(outside)
    before = outside.read_text().replace("enabled = false", "enabled = true", 1)
    outside.write_text(before)
    (root / "ome.toml").symlink_to(outside)
    error = one_line_error(run("disable", "reflect_episodes", "--root", str(root)))
    assert str(root / "ome.toml") in error and "outside the memory root" in error
    assert (root / "ome.toml").is_symlink()
    assert outside.read_text() == before


def test_enable_refuses_a_dangling_symlinked_ome_toml_and_creates_nothing(root: Path) -> None:
    # Written through, it failed naming a temp file beside a folder that does not exist.
    (root / "ome.toml").unlink()
    (root / "ome.toml").symlink_to(Path("gone/ome.toml"))
    error = one_line_error(run("enable", "reflect_episodes", "--root", str(root)))
    assert str(root / "ome.toml") in error and "does not exist" in error
    assert ".tmp" not in error and not (root / "gone").exists()


def test_init_force_writes_through_a_symlinked_ome_toml(root: Path) -> None:
    shared = root / "config" / "ome.toml"
    shared.parent.mkdir()
    shared.write_text("# mine\n")
    (root / "ome.toml").unlink()
    (root / "ome.toml").symlink_to(Path("config/ome.toml"))
    result = run("init", str(root), "--force")
    assert result.exit_code == 0, result.output
    assert (root / "ome.toml").is_symlink()
    assert shared.read_text() == packaged_text("ome.toml")


def test_init_force_refuses_a_link_outside_the_root_before_writing_anything(
    root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere.toml"
    outside.write_text("# mine\n")
    (root / "ome.toml").unlink()
    (root / "ome.toml").symlink_to(outside)
    (root / "everos.toml").write_text("# my settings\n")
    error = one_line_error(run("init", str(root), "--force"))
    assert "outside the memory root" in error
    assert outside.read_text() == "# mine\n"
    assert (root / "everos.toml").read_text() == "# my settings\n"


def test_disable_keeps_user_comments_and_layout_byte_for_byte(root: Path) -> None:
    text = (
        "# my notes\n\n"
        "[strategies.reflect_episodes]   # the main one\n"
        "cron = \"0 3 * * 0\"   # Sundays\n"
        "enabled    =   true # on!\n"
        "max_clusters_per_run = 5\n\n"
        "# trailing words\n"
    )
    (root / "ome.toml").write_text(text)
    result = run("disable", "reflect_episodes", "--root", str(root), "--json")
    assert result.exit_code == 0, result.output
    assert one_json(result) == {
        "name": "reflect_episodes",
        "enabled": False,
        "file": str(root / "ome.toml"),
        "changed": True,
    }
    after = (root / "ome.toml").read_text()
    before_lines, after_lines = text.splitlines(), after.splitlines()
    assert len(before_lines) == len(after_lines)
    changed = [(b, a) for b, a in zip(before_lines, after_lines, strict=True) if b != a]
    assert len(changed) == 1
    assert tomllib.loads(changed[0][1]) == {"enabled": False}
    assert "# on!" in changed[0][1]


def test_config_files_saved_with_a_byte_order_mark_are_read_and_edited(root: Path) -> None:
    """Notepad's UTF-8 (before 2019) starts a file with a BOM: tomllib refused both files as
    "TOML syntax error: Invalid statement" on line 1: commands stopped on everos.toml, the
    daemon kept its last good ome.toml (or none), and `enable` refused to touch it."""
    from everos_reflect.lint import config_problems
    from everos_reflect.settings import load_ome, load_settings

    (root / "everos.toml").write_bytes(b'\xef\xbb\xbf[llm]\r\nprovider = "extractive"\r\n')
    (root / "ome.toml").write_bytes(
        b"\xef\xbb\xbf[strategies.reflect_episodes]\r\nenabled = false # off\r\n")
    assert config_problems(root) == []
    assert load_settings(root).llm.provider == "extractive"
    assert load_ome(root) == {"reflect_episodes": {"enabled": False}}
    assert run("enable", "reflect_episodes", "--root", str(root)).exit_code == 0
    assert (root / "ome.toml").read_bytes() == (
        b"\xef\xbb\xbf[strategies.reflect_episodes]\r\nenabled = true # off\r\n")


def test_enable_again_is_a_no_op_that_leaves_the_file_alone(root: Path) -> None:
    assert run("enable", "reflect_episodes", "--root", str(root)).exit_code == 0
    stat = (root / "ome.toml").stat()
    result = run("enable", "reflect_episodes", "--root", str(root), "--json")
    assert one_json(result)["changed"] is False
    assert (root / "ome.toml").stat().st_mtime_ns == stat.st_mtime_ns


def test_enable_keeps_the_file_permissions(root: Path) -> None:
    (root / "ome.toml").chmod(0o640)
    assert run("enable", "reflect_episodes", "--root", str(root)).exit_code == 0
    assert (root / "ome.toml").stat().st_mode & 0o777 == 0o640
    assert (root / "everos.toml").stat().st_mode & 0o777 == 0o644


def test_enable_creates_a_missing_table_and_a_missing_file(root: Path) -> None:
    (root / "ome.toml").write_text("# only a comment\n")
    assert run("enable", "reflect_episodes", "--root", str(root)).exit_code == 0
    text = (root / "ome.toml").read_text()
    assert text.startswith("# only a comment\n")
    assert tomllib.loads(text) == {"strategies": {"reflect_episodes": {"enabled": True}}}

    (root / "ome.toml").unlink()
    assert run("enable", "reflect_episodes", "--root", str(root)).exit_code == 0
    expected = packaged_text("ome.toml").replace("enabled = false", "enabled = true", 1)
    assert (root / "ome.toml").read_text() == expected


def test_set_enabled_adds_the_key_to_an_existing_table_and_keeps_others() -> None:
    text = "[strategies.reflect_episodes]\ncron = \"0 2 * * 1\"\n\n[strategies.other]\nx = 1\n"
    out = set_enabled(text, "reflect_episodes", True, "ome.toml")
    assert tomllib.loads(out) == {
        "strategies": {
            "reflect_episodes": {"cron": "0 2 * * 1", "enabled": True},
            "other": {"x": 1},
        }
    }
    assert out.startswith('[strategies.reflect_episodes]\ncron = "0 2 * * 1"\n')


def test_enable_adds_a_strategy_to_strategies_written_as_an_inline_table(root: Path) -> None:
    text = "strategies = { reflect_episodes = { enabled = false } }  # mine\n"
    (root / "ome.toml").write_text(text)
    result = run("enable", "learn_lessons", "--root", str(root))
    assert result.exit_code == 0, result.output
    after = (root / "ome.toml").read_text()
    assert after.endswith("}  # mine\n")
    assert tomllib.loads(after) == {"strategies": {"reflect_episodes": {"enabled": False},
                                                   "learn_lessons": {"enabled": True}}}


def test_enable_unknown_strategy_fails_and_names_the_known_ones(root: Path) -> None:
    before = (root / "ome.toml").read_text()
    line = one_line_error(run("enable", "reflect_episode", "--root", str(root)))
    assert "unknown strategy 'reflect_episode'" in line
    assert "reflect_episodes" in line
    assert (root / "ome.toml").read_text() == before


def test_enable_on_a_broken_ome_reports_file_and_line_and_writes_nothing(root: Path) -> None:
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nenabled = \n")
    line = one_line_error(run("enable", "reflect_episodes", "--root", str(root)))
    assert "ome.toml: line 2: TOML syntax error" in line
    assert (root / "ome.toml").read_text() == "[strategies.reflect_episodes]\nenabled = \n"


def test_set_enabled_rejects_a_non_table_strategy() -> None:
    with pytest.raises(ConfigError) as info:
        set_enabled("[strategies]\nreflect_episodes = 1\n", "reflect_episodes", True, "o.toml")
    assert info.value.problems[0][:2] == ("o.toml", "strategies.reflect_episodes")


def test_enable_without_a_root_says_how_to_make_one(tmp_path: Path) -> None:
    line = one_line_error(run("enable", "reflect_episodes", "--root", str(tmp_path / "nope")))
    assert "no memory root" in line and "everos-reflect init" in line


# --- add --------------------------------------------------------------------------------------


def test_add_appends_an_episode_and_prints_its_id(root: Path) -> None:
    result = add(root, "--subject", "Dog", "--content", "Adopted Toby.\n## not a heading",
                 "--timestamp", "2026-10-12T23:30:00-02:00", "--session", "s1",
                 "--importance", "7")
    assert result.exit_code == 0, result.output
    assert result.stdout == "ep_20261013_0001\n"  # the UTC date names the file
    from everos_reflect.markdown.store import MarkdownStore
    from everos_reflect.model import UserRef

    entry = MarkdownStore(root).get(UserRef.of("u1"), "ep_20261013_0001")
    assert entry.meta["owner_id"] == "u1"
    assert entry.session_id == "s1"
    assert (entry.parent_type, entry.parent_id) == ("memcell", "s1")
    assert entry.meta["importance"] == 7
    assert entry.timestamp is not None and entry.timestamp.isoformat() == (
        "2026-10-12T23:30:00-02:00"
    )
    assert entry.subject == "Dog"
    assert entry.content == "Adopted Toby.\n## not a heading"


def test_add_json_and_generated_memcell_parent(root: Path) -> None:
    result = add(root, "--app", "acme", "--project", "bot", "--subject", "S", "--content", "C",
                 "--timestamp", "2026-01-02T03:04:05Z", "--json")
    assert result.exit_code == 0, result.output
    doc = one_json(result)
    assert doc == {
        "id": "ep_20260102_0001",
        "app_id": "acme",
        "project_id": "bot",
        "user_id": "u1",
        "timestamp": "2026-01-02T03:04:05+00:00",
        "path": "acme/bot/users/u1/episodes/episode-2026-01-02.md",
    }
    text = (root / doc["path"]).read_text()
    assert "parent_type: memcell" in text
    assert "parent_id: mc_" in text
    assert "session_id" not in text
    second = add(root, "--app", "acme", "--project", "bot", "--subject", "S2", "--content", "C",
                 "--timestamp", "2026-01-02T08:00:00Z")
    assert second.stdout == "ep_20260102_0002\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--user", "../x"], "invalid user_id"),
        (["--user", "u1", "--app", "a/b"], "invalid app_id"),
        (["--user", "u1", "--session", "s 1"], "invalid session_id"),
        (["--user", "u1", "--timestamp", "yesterday"], "--timestamp 'yesterday' is not ISO 8601"),
        (["--user", "u1", "--timestamp", "9999-12-31T23:00:00-05:00"],
         "--timestamp '9999-12-31T23:00:00-05:00' is outside years 1-9999 once converted to UTC"),
        (["--user", "u1", "--subject", "   "], "--subject must not be empty"),
        # Invisible format characters alone (zero-width space, BOM) are no text either.
        (["--user", "u1", "--subject", "\u200b"], "--subject must not be empty"),
        (["--user", "u1", "--content", " \u200b\ufeff\u2060 "], "--content must not be empty"),
        (["--user", "u1", "--subject", "a\nb"], "--subject must be one line"),
        # A lone CR was written as a line feed: a subject of two lines in the daily log.
        (["--user", "u1", "--subject", "a\rb"], "--subject must be one line"),
        (["--user", "u1", "--subject", "a\u2028b"], "--subject must be one line"),
        # A NUL made the daily log a "binary file" to grep and git; an ESC drove a terminal.
        (["--user", "u1", "--content", "To\x00by"], "--content holds the control character U+0000"),
        (["--user", "u1", "--subject", "Pets \x1b[2J"],
         "--subject holds the control character U+001B"),
        (["--user", "u1", "--content", "a\x1fb"], "--content holds the control character U+001F"),
        (["--user", "u1", "--content", "a\x85b"], "--content holds the control character U+0085"),
        (["--user", "u1", "--subject", "Pets \x9b2J"],
         "--subject holds the control character U+009B"),
    ],
)
def test_add_rejects_bad_input_with_one_line_and_writes_nothing(
    root: Path, args: list[str], expected: str
) -> None:
    base = {"--subject": "S", "--content": "C"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    flat = [part for pair in base.items() for part in pair]
    line = one_line_error(run("add", "--root", str(root), *flat))
    assert expected in line
    assert not (root / "default_app").exists()


def test_add_to_an_unparseable_log_fails_and_leaves_it_alone(root: Path) -> None:
    broken = write_log(root, "u1/episodes/episode-2026-03-04.md", "no frontmatter here\n")
    line = one_line_error(add(root, "--subject", "S", "--content", "C",
                              "--timestamp", "2026-03-04T10:00:00Z"))
    assert "episode-2026-03-04.md" in line
    assert broken.read_text() == "no frontmatter here\n"


def test_add_importance_out_of_range_is_a_usage_error(root: Path) -> None:
    result = add(root, "--subject", "S", "--content", "C", "--importance", "11")
    assert result.exit_code == 2
    assert "--importance" in result.stderr


# --- lint -------------------------------------------------------------------------------------


def test_lint_clean_root_exits_zero(root: Path) -> None:
    assert add(root, "--subject", "S", "--content", "C").exit_code == 0
    result = run("lint", "--root", str(root), "--json")
    assert result.exit_code == 0, result.output
    doc = one_json(result)
    assert doc == {"root": str(root), "ok": True, "files_checked": 1, "problems": []}


def test_lint_reports_cross_file_problems_with_file_and_line(root: Path) -> None:
    write_log(root, "u1/episodes/episode-2026-10-12.md", EPISODES)
    write_log(root, "u1/.atomic_facts/atomic_fact-2026-10-12.md", FACTS)
    result = run("lint", "--root", str(root))
    assert result.exit_code == 1
    ep = "default_app/default_project/users/u1/episodes/episode-2026-10-12.md"
    af = "default_app/default_project/users/u1/.atomic_facts/atomic_fact-2026-10-12.md"
    *problems, summary = result.stdout.splitlines()
    assert sorted(problems) == [
        f"{af}:17: atomic fact af_20261012_0002: parent episode ep_20261012_0077 not found",
        f"{ep}:8: deprecated_entries: ep_20261012_0009 is not an entry of this file",
    ]
    assert summary == "2 files checked, 2 errors"  # on stdout, after the problems
    assert result.stderr == ""


def test_lint_reports_deprecation_pointing_at_unknown_id(root: Path) -> None:
    text = EPISODES.replace(
        "ep_20261012_0001: ep_20261012_0002", "ep_20261012_0001: ep_20990101_0001"
    )
    text = text.replace("  ep_20261012_0009: ep_20261012_0002\n", "")
    write_log(root, "u1/episodes/episode-2026-10-12.md", text)
    result = run("lint", "--root", str(root), "--json")
    doc = one_json(result)
    assert result.exit_code == 1
    assert doc["ok"] is False
    assert [(p["line"], p["message"]) for p in doc["problems"]] == [
        (7, "deprecated_entries: ep_20261012_0001 points at unknown id ep_20990101_0001")
    ]


def test_lint_reports_an_entry_archived_toward_itself_or_in_a_cycle(root: Path) -> None:
    # Each id names a real entry, so nothing was reported, yet no entry of the cycle is live:
    # a hand edit hid them all from search without a word.
    marks = "  ep_20261012_0001: ep_20261012_0002\n  ep_20261012_0009: ep_20261012_0002\n"
    for edited, expected in (
        ("  ep_20261012_0001: ep_20261012_0001\n",
         "deprecated_entries: ep_20261012_0001 is archived toward itself"),
        ("  ep_20261012_0001: ep_20261012_0002\n  ep_20261012_0002: ep_20261012_0001\n",
         "deprecated_entries: ep_20261012_0001 is archived in a cycle "
         "(ep_20261012_0001 -> ep_20261012_0002 -> ep_20261012_0001): none of it is live"),
    ):
        write_log(root, "u1/episodes/episode-2026-10-12.md", EPISODES.replace(marks, edited))
        result = run("lint", "--root", str(root), "--json")
        assert result.exit_code == 1
        assert expected in [p["message"] for p in one_json(result)["problems"]], result.output


def test_lint_includes_parser_diagnostics_for_misplaced_ids(root: Path) -> None:
    misplaced = EPISODES.replace("entry:ep_20261012_0002", "entry:ep_20261011_0002")
    write_log(root, "u1/episodes/episode-2026-10-12.md", misplaced)
    result = run("lint", "--root", str(root))
    assert result.exit_code == 1
    ep = "default_app/default_project/users/u1/episodes/episode-2026-10-12.md"
    assert f"{ep}:23: entry id ep_20261011_0002 does not belong in this file" in result.stdout


def test_lint_reports_config_problems(root: Path) -> None:
    (root / "everos.toml").write_text("[server]\nport = 0\n")
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nenabled = \n")
    result = run("lint", "--root", str(root))
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "everos.toml: server.port: must be a whole number from 1 to 65535, got 0",
        "ome.toml:2: TOML syntax error: Invalid value",
        "0 files checked, 2 errors",
    ]


def test_lint_and_status_call_a_model_the_local_provider_ignores_a_config_problem(
        root: Path) -> None:
    (root / "everos.toml").write_text('[embedding]\nmodel = "all-mpnet-base-v2"\n')
    result = run("lint", "--root", str(root))
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0].startswith(
        "everos.toml: embedding.model: the local provider runs only its bundled "
        "model (all-MiniLM-L6-v2), got 'all-mpnet-base-v2'")
    doc = one_json(run("status", "--root", str(root), "--json"))
    assert doc["config"]["ok"] is False
    assert [p["message"].split(":")[0] for p in doc["config"]["problems"]] == ["embedding.model"]
    # a root naming the shipped model is fine
    (root / "everos.toml").write_text('[embedding]\nmodel = "all-MiniLM-L6-v2"\n')
    assert run("lint", "--root", str(root)).exit_code == 0
    assert one_json(run("status", "--root", str(root), "--json"))["config"]["ok"] is True


def test_lint_reports_env_problems(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVEROS_LLM__PROVIDER", "gpt")
    result = run("lint", "--root", str(root), "--json")
    assert result.exit_code == 1
    [problem] = one_json(result)["problems"]
    assert problem["file"] == "environment"
    assert problem["message"].startswith("EVEROS_LLM__PROVIDER: must be one of")


def test_lint_missing_root_is_one_line(tmp_path: Path) -> None:
    assert "no memory root" in one_line_error(run("lint", "--root", str(tmp_path / "nope")))


def test_lint_example_root_is_clean() -> None:
    example = Path(__file__).resolve().parents[1] / "memory_root_example"
    result = run("lint", "--root", str(example))
    assert result.exit_code == 0, result.output


# --- status -----------------------------------------------------------------------------------


def test_status_from_markdown(root: Path) -> None:
    write_log(root, "u1/episodes/episode-2026-10-12.md", EPISODES)
    write_log(root, "u1/.atomic_facts/atomic_fact-2026-10-12.md", FACTS)
    assert add(root, "--user", "u2", "--subject", "S", "--content", "C").exit_code == 0
    (root / "everos.toml").write_text("[llm]\nprovder = 'openai'\n")
    result = run("status", "--root", str(root), "--json")
    # the report is given; exit 1: with everos.toml invalid no strategy runs (no daemon here)
    assert result.exit_code == 1, result.output
    assert one_line_error(result) == (
        "error: invalid configuration: everos.toml: llm.provder: unknown key (did "
        "you mean 'provider'?); no strategy runs until it is fixed (`serve` does not start)")
    doc = one_json(result)
    assert doc["root"] == str(root)
    assert doc["counts_from"] == "markdown"
    users = {u["user_id"]: u for u in doc["users"]}
    assert users["u1"]["episode"] == {"live": 1, "deprecated": 1}
    assert users["u1"]["atomic_fact"] == {"live": 2, "deprecated": 0}
    assert users["u2"]["episode"] == {"live": 1, "deprecated": 0}
    assert doc["totals"]["episode"] == {"live": 2, "deprecated": 1}
    assert [f["file"] for f in doc["files_with_problems"]] == sorted([
        "default_app/default_project/users/u1/.atomic_facts/atomic_fact-2026-10-12.md",
        "default_app/default_project/users/u1/episodes/episode-2026-10-12.md",
    ])
    assert doc["config"] == {
        "ok": False,
        "in_force": "ome.toml",
        "problems": [{
            "file": "everos.toml",
            "line": 0,
            "message": "llm.provder: unknown key (did you mean 'provider'?)",
            "severity": "error",
        }],
    }


def test_status_of_a_root_whose_system_db_is_an_empty_file_reads_the_markdown(
        root: Path) -> None:
    """SPEC §6's ``sqlite3 <root>/.index/sqlite/system.db "SELECT ..."`` on a root not indexed
    yet leaves an empty ``system.db``. ``status`` then said reflect_insights "needs an LLM: no
    owner's live Episodes span 3+ weeks" (asked of that empty file) and, asking, created the
    index's tables in it, so the next ``status`` counted 0 Episodes for every user."""
    for day in ("2026-09-01", "2026-09-09", "2026-09-17", "2026-09-25"):
        stamp = day.replace("-", "")
        write_log(root, f"u1/episodes/episode-{day}.md", (
            f"---\ntype: episode_daily\nschema_version: 1\nuser_id: u1\ndate: '{day}'\n---\n"
            f"<!-- entry:ep_{stamp}_0001 -->\n---\nowner_id: u1\n"
            f"timestamp: {day}T09:00:00+00:00\nparent_type: memcell\nparent_id: mc_1\n---\n"
            f"## Subject\nCheckout test\n\n## Content\nThe checkout test flaked again.\n"
            f"<!-- /entry:ep_{stamp}_0001 -->\n"))
    db = root / ".index" / "sqlite" / "system.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"")
    for _ in range(2):
        doc = one_json(run("status", "--root", str(root), "--json"))
        assert doc["counts_from"] == "markdown"
        assert doc["totals"]["episode"] == {"live": 4, "deprecated": 0}
        (insights,) = [s for s in doc["strategies"] if s["name"] == "reflect_insights"]
        assert insights["unavailable"] is None
    assert db.read_bytes() == b""


def test_status_prefers_the_index_when_present(root: Path) -> None:
    from everos_reflect.index import db as dbmod

    conn = dbmod.connect(root)
    rows = [("ep_20261012_0001", "episode", None),
            ("ep_20261012_0002", "episode", "ep_20261012_0001"),
            ("af_20261012_0001", "atomic_fact", None)]
    for entry_id, kind, dep in rows:
        conn.execute(
            "INSERT INTO entries (app_id, project_id, user_id, id, kind, path, deprecated_by, "
            "content_hash, text_hash) VALUES ('a', 'p', 'u9', ?, ?, 'x.md', ?, 'h', 'h')",
            (entry_id, kind, dep),
        )
    conn.execute(
        "INSERT INTO files (path, app_id, project_id, user_id, kind, mtime_ns, size, sha256, "
        "problems, synced_at) VALUES ('a/p/users/u9/episodes/episode-2026-10-12.md', 'a', 'p', "
        "'u9', 'episode', 0, 0, 's', ?, 'now')",
        (json.dumps(["3: bad yaml"]),),
    )
    conn.commit()
    conn.close()
    doc = one_json(run("status", "--root", str(root), "--json"))
    assert doc["counts_from"] == "index"
    assert doc["users"] == [{
        "app_id": "a", "project_id": "p", "user_id": "u9",
        "episode": {"live": 1, "deprecated": 1},
        "atomic_fact": {"live": 1, "deprecated": 0},
        **{k: {"live": 0, "deprecated": 0}
           for k in ("insight", "conviction", "relation", "task", "lesson")},
    }]
    assert doc["files_with_problems"] == [
        {"file": "a/p/users/u9/episodes/episode-2026-10-12.md", "problems": ["3: bad yaml"],
         "lines": [0]}  # a problem stored as text: its line is not read out of it
    ]
    assert doc["config"] == {"ok": True, "in_force": "ome.toml", "problems": []}


def test_status_text_output_lists_users_and_problems(root: Path) -> None:
    assert add(root, "--user", "u_text", "--subject", "S", "--content", "C").exit_code == 0
    (root / "everos.toml").write_text("[server]\nport = 0\n")
    result = run("status", "--root", str(root))
    assert result.exit_code == 1, result.output  # the config is invalid: the report is given
    assert "u_text" in result.stdout
    assert "no files with problems" in result.stdout
    assert "server.port" in result.stdout


def test_status_strategy_table_fits_80_columns_and_says_a_problem_once(root: Path) -> None:
    # each strategy that needs an LLM put its whole 200-character reason in its cell (20
    # wrapped lines each, the same text four times) and the names were cut to "detect_contra…"
    result = run("status", "--root", str(root))
    assert result.exit_code == 0, result.output
    table = [line for line in result.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(map(len, table)) <= 80
    for name in ("detect_contradictions", "revalidate_insights", "update_worldview"):
        assert any(name in line for line in table), name
    reason = "are written by a language model; the extractive provider writes none"
    assert result.stdout.count(reason) == 1
    assert sum("[1]" in line for line in table) == 3  # the three belief tiers
    assert "[1] needs an LLM: convictions, contradictions and reconciliations" in result.stdout


def test_status_strategy_table_says_yes_no_and_dash_not_python_values(root: Path) -> None:
    # the table showed "True"/"False" for enabled and "None" for a strategy without a cron
    assert run("enable", "reflect_episodes", "--root", str(root)).exit_code == 0
    result = run("status", "--root", str(root))
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:4]]
            for line in result.stdout.splitlines()
            if line.startswith("│") and line.split("│")[1].strip()}
    assert rows["reflect_episodes"] == ["yes", "0 2 * * 1"]
    assert rows["update_worldview"] == ["no", "-"]
    assert not {"True", "False", "None"} & {c for cells in rows.values() for c in cells}


@pytest.mark.parametrize(("stamp", "shown"), [
    ("2026-12-07T02:00:00+00:00", "2026-12-07 02:00"),
    ("2026-12-07T02:00:59.615700+05:30", "2026-12-07 02:00 +05:30"),
    ("2026-12-07T02:00:00", "2026-12-07 02:00"),
    ("not a time", "not a time"),
    (None, ""),
])
def test_status_shows_times_to_the_minute(stamp: object, shown: str) -> None:
    assert store_cmds._when(stamp) == shown


def test_status_missing_root_is_one_line(tmp_path: Path) -> None:
    assert "no memory root" in one_line_error(run("status", "--root", str(tmp_path / "nope")))


def test_main_cli_registers_these_commands() -> None:
    from everos_reflect.cli.main import cli as main_cli

    for name in ("init", "add", "lint", "status", "enable", "disable"):
        assert name in main_cli.commands


def test_status_document_survives_a_corrupt_index(root: Path) -> None:
    from everos_reflect.index import db as dbmod

    path = dbmod.db_path(root)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a database at all" * 100)
    assert add(root, "--subject", "S", "--content", "C").exit_code == 0
    doc = one_json(run("status", "--root", str(root), "--json"))
    assert doc["counts_from"] == "markdown"
    assert [u["user_id"] for u in doc["users"]] == ["u1"]
    assert doc["users"][0]["episode"] == {"live": 1, "deprecated": 0}


def test_lint_reports_a_hand_written_subject_over_the_bound_and_reads_the_entry(
    root: Path,
) -> None:
    # add refuses a subject over 500 characters; one written by hand is reported, not lost
    text = EPISODES.replace("## Subject\nDog\n", "## Subject\n" + "Dog " * 25_000 + "\n", 1)
    write_log(root, "u1/episodes/episode-2026-10-12.md", text)
    doc = one_json(run("lint", "--root", str(root), "--json"))
    [long] = [p for p in doc["problems"] if "subject" in p["message"]]
    assert long["severity"] == "warning" and long["line"] == 10
    assert "subject must be at most 500 characters, got 99,999" in long["message"]
    from everos_reflect.markdown.parser import parse_log

    log = parse_log(text, "episode-2026-10-12.md")
    assert log.entries[0].subject == ("Dog " * 25_000).strip()


@pytest.mark.parametrize(("written", "lines"), [
    ("Dog\nand cat", 2),             # a second line under ## Subject
    ("Dog\n\nand cat", 3),           # a paragraph break
    ("Dog\u2028and cat", 2),         # a line separator: a line break to YAML and editors
    ("Dog\rand cat", 2),             # a lone carriage return (CRLF endings are not one)
])
def test_lint_reports_a_hand_written_subject_of_several_lines_and_reads_the_entry(
    root: Path, written: str, lines: int,
) -> None:
    # add, the API and MCP refuse "subject: must be one line"; written by hand it was read,
    # shown with its line break in JSON and briefings, and lint said nothing
    text = EPISODES.replace("## Subject\nDog\n", f"## Subject\n{written}\n", 1)
    write_log(root, "u1/episodes/episode-2026-10-12.md", text)
    doc = one_json(run("lint", "--root", str(root), "--json"))
    [multi] = [p for p in doc["problems"] if "subject" in p["message"]]
    assert multi["severity"] == "warning" and multi["line"] == 10
    assert multi["file"].endswith("u1/episodes/episode-2026-10-12.md")
    assert multi["message"] == (f"entry ep_20261012_0001: subject is {lines} lines; it must be "
                                "one line (kept and indexed as written; join them)")
    from everos_reflect.markdown.parser import parse_log

    log = parse_log(text, "episode-2026-10-12.md")
    assert log.entries[0].subject == written


@pytest.mark.parametrize(("written", "what"), [
    ("", "no '## Subject' section"),                                  # the section left out
    ("## Subject\n\n", "'## Subject' section is empty"),              # the heading alone
    ("## Subject\n  \u200b\n\n", "'## Subject' section is empty"),    # nothing visible
])
def test_lint_warns_of_a_hand_written_episode_without_a_subject_and_reads_it(
    root: Path, written: str, what: str,
) -> None:
    # add, the API and MCP refuse an empty subject; written by hand the Episode was indexed,
    # searched and merged with none (shown blank) and lint said "0 errors"
    text = EPISODES.replace("## Subject\nDog\n\n", written, 1)
    write_log(root, "u1/episodes/episode-2026-10-12.md", text)
    doc = one_json(run("lint", "--root", str(root), "--json"))
    [warning] = [p for p in doc["problems"] if "Subject" in p["message"]]
    assert warning == {
        "file": "default_app/default_project/users/u1/episodes/episode-2026-10-12.md",
        "line": 10, "severity": "warning",
        "message": f"entry ep_20261012_0001: {what}; an Episode needs a one-line subject, as "
                   "add requires (indexed and merged without one; write it)"}
    from everos_reflect.markdown.parser import parse_log

    log = parse_log(text, "episode-2026-10-12.md")
    assert [e.id for e in log.entries] == ["ep_20261012_0001", "ep_20261012_0002"]


def test_lint_takes_a_crlf_subject_for_one_line(root: Path) -> None:
    text = EPISODES.replace("\n", "\r\n")
    write_log(root, "u1/episodes/episode-2026-10-12.md", text)
    doc = one_json(run("lint", "--root", str(root), "--json"))
    assert not [p for p in doc["problems"] if "subject" in p["message"]]


def test_lint_fails_on_a_warning_too(tmp_path: Path) -> None:
    from everos_reflect.markdown.store import MarkdownStore
    from everos_reflect.model import Kind, UserRef

    store = MarkdownStore(tmp_path)
    ref = UserRef.of("u_lint")
    entry = store.append(ref, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00",
                                             "parent_type": "memcell"},
                         {"Subject": "s", "Content": "c"})
    path = store.path_for_id(ref, entry.id)
    # a naive timestamp is indexed (as UTC) but reported
    path.write_text(path.read_text().replace("2026-10-12T09:00:00+00:00", "2026-10-12T09:00:00"))

    result = CliRunner().invoke(cli, ["lint", "--root", str(tmp_path), "--json"])

    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["ok"] is False
    assert [p["severity"] for p in doc["problems"]] == ["warning"]


def test_lint_and_status_call_an_indented_entry_marker_an_error(root: Path) -> None:
    # "\t<!-- entry:ID -->" is no marker: the entry was skipped (not indexed, not searchable,
    # not merged), lint only warned and status said "no files with errors"
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.index.sync import Indexer
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings

    for subject, stamp in (("Dog", "2026-10-12T09:00:00+00:00"),
                           ("Cat", "2026-10-12T10:00:00+00:00")):
        assert add(root, "--subject", subject, "--content", "c", "--timestamp",
                   stamp).exit_code == 0
    rt = Runtime(root, Settings(), embedder=HashEmbedder(32))
    try:
        Indexer(rt).scan()
        path = root / USERS / "u1/episodes/episode-2026-10-12.md"
        path.write_text(path.read_text().replace("<!-- entry:ep_20261012_0001",
                                                 "\t<!-- entry:ep_20261012_0001"))
        result = run("lint", "--root", str(root), "--json")
        assert result.exit_code == 1
        rel = "default_app/default_project/users/u1/episodes/episode-2026-10-12.md"
        message = ("opening marker of 'ep_20261012_0001' is indented: the entry is not read "
                   "(kept as written; remove the indentation before the marker)")
        assert one_json(result)["problems"] == [
            {"file": rel, "line": 7, "message": message, "severity": "error"}]
        Indexer(rt).scan()
        # no entry to a reindex, so none to the sync (provenance takes it as unknown)
        assert rt.db().execute("SELECT count(*) FROM entries").fetchone()[0] == 1
    finally:
        rt.close()
    from_index = one_json(run("status", "--root", str(root), "--json"))
    (root / ".index/sqlite/system.db").unlink()
    from_markdown = one_json(run("status", "--root", str(root), "--json"))
    for doc, source in ((from_index, "index"), (from_markdown, "markdown")):
        assert doc["counts_from"] == source
        assert doc["files_with_problems"] == [{"file": rel, "problems": [f"7: {message}"],
                                                "lines": [7]}]


@pytest.mark.parametrize("command", ["enable", "disable"])
def test_enable_refuses_an_ome_toml_a_daemon_would_not_take(root: Path, command: str) -> None:
    # A problem elsewhere in the file (an unknown key): the daemon keeps its last good
    # configuration, so `disable` said "disabled", exit 0, and the strategy went on running.
    text = ("[strategies.learn_lessons]\nbogus = 1\n\n"
            "[strategies.reflect_episodes]\nenabled = true\n")
    (root / "ome.toml").write_text(text)
    result = run(command, "reflect_episodes", "--root", str(root))
    assert result.exit_code == 1, result.output
    assert "strategies.learn_lessons.bogus: unknown setting" in result.stderr
    assert "the change would not take effect" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert (root / "ome.toml").read_text() == text


def test_enable_mends_a_wrongly_typed_enabled(root: Path) -> None:
    (root / "ome.toml").write_text('[strategies.reflect_episodes]\nenabled = "no"\n')
    assert run("enable", "reflect_episodes", "--root", str(root)).exit_code == 0
    assert (root / "ome.toml").read_text() == "[strategies.reflect_episodes]\nenabled = true\n"


def test_paths_with_a_line_break_are_printed_escaped_as_errors_show_them(
        tmp_path: Path) -> None:
    """`init` printed a root named "a<newline>b" raw: its lines broke in two, the second
    looking like a line of output of its own. Paths in a command's own output are shown as
    its errors show them (`\\n`), in init, enable, status and lint alike."""
    path = tmp_path / "my\nroot"
    result = run("init", str(path))
    assert result.exit_code == 0, result.output
    shown = f"{tmp_path}/my\\nroot"
    assert len(result.stdout.splitlines()) == 3 and shown in result.stdout  # quoted by init

    enabled = run("enable", "reflect_episodes", "--root", str(path))
    assert enabled.stdout == f"reflect_episodes enabled in {shown}/ome.toml\n"

    write_log(path, "u1/episodes/episode\n2026.md", "# a note")
    status = run("status", "--root", str(path))
    assert f"root {shown}  (counts from" in status.stdout
    lint = run("lint", "--root", str(path))
    assert lint.stdout.splitlines()[0].startswith(
        f"{USERS}/u1/episodes/episode\\n2026.md: not read")
