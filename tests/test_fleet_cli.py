"""The fleet commands' edges that need no Ray session: the missing-Ray hint, bad fleet files,
``fleet status``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.fleet.config import read_fleet
from everos_reflect.fleet.work import fleet_engine, run_root
from everos_reflect.model import Kind
from everos_reflect.strategies.holdback import reflect_settings
from everos_reflect.strategies.undo import undo_merge
from tests.fleet_support import build_root, open_test_root, user_ref

#: roots built, then opened again: nothing else writes their logs meanwhile (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")


def _fleet(tmp_path: Path, text: str = 'roots = ["shard-*"]\n') -> str:
    (tmp_path / "fleet.toml").write_text(text, "utf-8")
    return str(tmp_path / "fleet.toml")


@pytest.mark.parametrize("command", [["run", "reflect_episodes"], ["serve"]])
def test_without_ray_the_fleet_commands_say_how_to_get_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    result = CliRunner().invoke(cli, ["fleet", *command, "--fleet", _fleet(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr.strip() == \
        "error: fleet commands need Ray: pip install 'everos-reflect[ray]'"


def test_ray_is_told_the_auth_mode_it_would_pick_unless_the_user_chose_one(
        tmp_path: Path) -> None:
    """Ray 2.59+ picks token authentication itself when RAY_AUTH_MODE is unset (a local Ray;
    `auto` with a token at hand) and says so in a WARNING on every fleet run."""
    from everos_reflect.fleet.ray_backend import ray_auth_mode

    home = tmp_path / "home"
    assert ray_auth_mode("", {}, home) == "token"
    assert ray_auth_mode("auto", {}, home) is None  # no token: Ray leaves it off, quietly
    assert ray_auth_mode("auto", {"RAY_AUTH_TOKEN": "t"}, home) == "token"
    assert ray_auth_mode("auto", {"RAY_AUTH_TOKEN_PATH": "/t"}, home) == "token"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("t")
    assert ray_auth_mode("auto", {}, home) == "token"
    assert ray_auth_mode("ray://head:10001", {}, home) is None
    for address in ("", "auto"):
        assert ray_auth_mode(address, {"RAY_AUTH_MODE": "disabled"}, home) is None


def test_a_bad_fleet_file_is_one_line_naming_every_problem(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path, 'roots = ["nowhere-*"]\nray_adress = "auto"\n')
    result = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet])
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "ray_adress: unknown key (did you mean 'ray_address'?)" in result.stderr
    fleet = _fleet(tmp_path, 'roots = ["nowhere-*"]\n')
    result = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet])
    assert "roots[0]: 'nowhere-*' matches no folder" in result.stderr


def test_fleet_status_json_has_every_root_last_run_next_run_and_lag(tmp_path: Path) -> None:
    for name in ("shard-a", "shard-b"):
        build_root(tmp_path / name)
    run_root(str(tmp_path / "shard-a"), "reflect_episodes", force=True, opener=open_test_root)
    (tmp_path / "shard-b" / "default_app" / "default_project" / "users" / "u_00" / "episodes"
     / "episode-2026-08-02.md").write_text("edited by hand\n", "utf-8")
    fleet = _fleet(tmp_path, 'roots = ["shard-*"]\n[strategies.reflect_episodes]\n'
                             'enabled = true\ncron = "0 3 * * *"\n')
    result = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    a, b = doc["roots"]
    assert a["root"].endswith("shard-a") and b["root"].endswith("shard-b")
    row = next(r for r in a["strategies"] if r["name"] == "reflect_episodes")
    assert row["last_run"]["status"] == "ok" and row["next_run"].endswith("03:00:00+00:00")
    assert a["index"]["files_changed"] == 0 and b["index"]["files_changed"] == 1
    text = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet])
    assert text.exit_code == 0
    assert "1 log," in text.stdout and "up to date" in text.stdout


def test_fleet_status_exits_1_when_a_root_cannot_be_read_with_or_without_json(
        tmp_path: Path) -> None:
    build_root(tmp_path / "shard-a")
    (tmp_path / "shard-b").mkdir()
    (tmp_path / "shard-b" / "everos.toml").write_text("broken = [\n", "utf-8")
    fleet = _fleet(tmp_path)

    as_json = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet, "--json"])
    text = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet])

    assert as_json.exit_code == text.exit_code == 1
    doc = json.loads(as_json.stdout)  # still the whole document, and nothing else on stdout
    assert [("error" in r) for r in doc["roots"]] == [False, True]
    assert doc["roots"][1]["root"].endswith("shard-b")
    assert doc["roots"][1]["error"].startswith("invalid configuration: everos.toml: ")
    assert text.stderr.strip() == "error: some roots could not be read (see above)"


def test_fleet_status_says_a_roots_ome_toml_is_invalid_not_that_its_strategies_are_disabled(
        tmp_path: Path) -> None:
    # every strategy of such a root read "disabled", exit 0, the error squeezed under the
    # first one in the index lag column; `status` on the root says the file is invalid, exit 1
    build_root(tmp_path / "shard-a")
    build_root(tmp_path / "shard-b", ome='[strategies.reflect_episodes]\nenabled = "yes"\n')
    fleet = _fleet(tmp_path)

    as_json = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet, "--json"])
    text = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet])

    assert as_json.exit_code == text.exit_code == 1
    a, b = json.loads(as_json.stdout)["roots"]
    assert a["config"] == {"in_force": "ome.toml"} and "error" not in b
    # said once, in the root's terms: a second copy stood beside it in ``config_error``,
    # the file was named by its absolute path, and every row said which config was in force
    problem = ('ome.toml: strategies.reflect_episodes.enabled: must be true or false, got a '
               'string: "yes"')
    assert b["config"] == {"in_force": "none",
                           "strategies_error": f"invalid configuration: {problem}"}
    assert "config_error" not in b and as_json.stdout.count("reflect_episodes.enabled") == 1
    assert not any("config_in_force" in row for row in a["strategies"] + b["strategies"])
    # the file named once in the text too ("ome.toml is invalid: ome.toml: …" named it twice)
    said = (f"invalid {problem}; no strategy runs on this root until it is fixed "
            "(a `fleet serve` started now would run none)")
    lines = text.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if "shard-b" in line)
    for row in b["strategies"]:
        line = next(line for line in lines[at:] if f" {row['name']} " in line)
        assert "ome.toml invalid" in line and "disabled" not in line, line
    assert "disabled" in lines[1]  # shard-a's own are as ome.toml says
    assert said in text.stdout
    assert text.stderr == ("error: the ome.toml of 1 root is invalid (see above): no strategy "
                           "runs there until it is fixed\n")


def test_status_and_clusters_read_a_roots_strategies_as_its_fleets_runs_do(
        tmp_path: Path) -> None:
    # status and clusters read the root's ome.toml alone: in a fleet they showed a switch, a
    # schedule and holds other than those the fleet's runs went by
    root = tmp_path / "shard-a"
    build_root(root, ome='[strategies.reflect_episodes]\ncron = "0 4 * * *"\n')  # root wins
    fleet = _fleet(tmp_path, 'roots = ["shard-*"]\n[strategies.reflect_episodes]\n'
                             'enabled = true\ncron = "0 3 * * *"\nremerge_undone = true\n')
    defaults = read_fleet(fleet)[0].strategies
    run_root(str(root), "reflect_episodes", force=True, defaults=defaults, opener=open_test_root)
    rt = open_test_root(str(root))
    narrative = next(e for e in rt.store.entries(user_ref(0), Kind.EPISODE)
                     if e.parent_type == "cluster" and e.deprecated_by is None)
    undo_merge(rt, user_ref(0), narrative.id)  # held back unless remerge_undone
    run = fleet_engine(rt, defaults, recover=False).settings_for("reflect_episodes")
    inside = reflect_settings(rt)  # an engine a strategy opens itself during the run
    rt.close()
    assert (run["enabled"], run["cron"], run["remerge_undone"]) == (True, "0 4 * * *", True)
    assert inside == run

    def status(*extra: str) -> dict[str, Any]:
        result = CliRunner().invoke(cli, ["status", "--root", str(root), "--json", *extra])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def held(*extra: str) -> list[bool]:
        result = CliRunner().invoke(cli, ["clusters", "--root", str(root), "--json", *extra])
        assert result.exit_code == 0, result.output
        return [c["held_back"] for c in json.loads(result.stdout)["clusters"]]

    alone, in_fleet = status(), status("--fleet", fleet)
    [row] = [r for r in alone["strategies"] if r["name"] == "reflect_episodes"]
    assert (row["enabled"], row["cron"], len(alone["merges"]["held_back"])) == \
        (False, "0 4 * * *", 1)
    [row] = [r for r in in_fleet["strategies"] if r["name"] == "reflect_episodes"]
    assert (row["enabled"], row["cron"], in_fleet["merges"]["held_back"]) == \
        (True, "0 4 * * *", [])
    assert row["next_run"].endswith("04:00:00+00:00")
    assert True in held() and True not in held("--fleet", fleet)


def test_status_with_a_fleet_the_root_is_not_in_is_one_line(tmp_path: Path) -> None:
    build_root(tmp_path / "shard-a")
    build_root(tmp_path / "other")
    fleet = _fleet(tmp_path)
    result = CliRunner().invoke(cli, ["status", "--root", str(tmp_path / "other"),
                                      "--fleet", fleet])
    assert result.exit_code == 1
    assert result.stderr.strip().endswith("(no pattern of its roots names it)")
    assert "is not a root of the fleet" in result.stderr


def test_strategies_reads_a_roots_strategies_as_its_fleets_runs_do(tmp_path: Path) -> None:
    # strategies read the root's ome.toml alone: in a fleet it said "disabled" of a strategy
    # the fleet's runs ran, and gave no next run
    root = tmp_path / "shard-a"
    build_root(root, ome='[strategies.reflect_episodes]\ncron = "0 4 * * *"\n')  # root wins
    fleet = _fleet(tmp_path, 'roots = ["shard-*"]\n[strategies.reflect_episodes]\n'
                             'enabled = true\ncron = "0 3 * * *"\n')

    def reflect_row(*extra: str) -> dict[str, Any]:
        result = CliRunner().invoke(cli, ["strategies", "--root", str(root), "--json", *extra])
        assert result.exit_code == 0, result.output
        rows = json.loads(result.stdout)["strategies"]
        [row] = [r for r in rows if r["name"] == "reflect_episodes"]
        return row

    alone, in_fleet = reflect_row(), reflect_row("--fleet", fleet)
    assert (alone["enabled"], alone["cron"], alone["next_run"]) == (False, "0 4 * * *", None)
    assert (in_fleet["enabled"], in_fleet["cron"]) == (True, "0 4 * * *")
    assert in_fleet["next_run"].endswith("04:00:00+00:00")
    text = CliRunner().invoke(cli, ["strategies", "--root", str(root), "--fleet", fleet])
    assert "reflect_episodes: enabled, cron 0 4 * * *" in text.stdout


def test_trigger_with_a_fleet_runs_in_process_with_the_fleets_settings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # trigger read the root's ome.toml alone: a strategy the fleet enables was "disabled" by
    # hand, and a forced run went by settings other than the fleet's runs
    from everos_reflect.cli import engine_cmds
    from everos_reflect.engine import daemon

    root = tmp_path / "shard-a"
    build_root(root)
    fleet = _fleet(tmp_path, 'roots = ["shard-*"]\n[strategies.reflect_episodes]\n'
                             'enabled = true\nmax_clusters_per_run = 1\n')
    monkeypatch.setattr(engine_cmds, "open_runtime", lambda _root: open_test_root(str(root)))

    def trigger(*extra: str) -> tuple[int, dict[str, Any]]:
        result = CliRunner().invoke(cli, ["trigger", "reflect_episodes", "--root", str(root),
                                          "--json", *extra])
        return result.exit_code, json.loads(result.stdout)

    code, alone = trigger()
    assert (code, alone["status"]) == (4, "disabled")

    def no_daemon(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a fleet's run goes through no root's daemon")

    monkeypatch.setattr(daemon, "trigger_via_daemon", no_daemon)
    code, in_fleet = trigger("--fleet", fleet)
    # enabled, and one merge of the three clusters: the fleet's max_clusters_per_run
    assert (code, in_fleet["status"], in_fleet["via"]) == (0, "ok", "in-process")
    assert in_fleet["counts"]["merged"] == 1


def test_strategies_and_trigger_with_a_fleet_the_root_is_not_in_are_one_line(
        tmp_path: Path) -> None:
    build_root(tmp_path / "shard-a")
    build_root(tmp_path / "other")
    fleet = _fleet(tmp_path)
    for command in (["strategies"], ["trigger", "reflect_episodes"]):
        result = CliRunner().invoke(cli, [*command, "--root", str(tmp_path / "other"),
                                          "--fleet", fleet])
        assert result.exit_code == 1
        assert "is not a root of the fleet" in result.stderr
        assert result.stderr.strip().endswith("(no pattern of its roots names it)")


def _bare_roots(tmp_path: Path, *names: str) -> list[str]:
    for name in names:
        (tmp_path / name / ".index").mkdir(parents=True)
    return [str(tmp_path / name) for name in names]


def _status_roots(*args: str) -> tuple[int, list[str], str]:
    result = CliRunner().invoke(cli, ["fleet", "status", *args, "--json"])
    doc = json.loads(result.stdout) if result.exit_code == 0 else {"roots": []}
    return result.exit_code, [r["root"] for r in doc["roots"]], result.stderr


def test_fleet_commands_take_root_as_every_command_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SPEC §8: every command takes --root PATH (else EVEROS_ROOT, else ~/.everos); the fleet
    commands refused it ("No such option: --root") and needed a fleet.toml for one root."""
    a, b, c = _bare_roots(tmp_path, "shard-a", "shard-b", "shard-c")
    assert _status_roots("--root", a, "--root", c) == (0, [a, c], "")
    fleet = _fleet(tmp_path)
    assert _status_roots("--fleet", fleet) == (0, [a, b, c], "")
    assert _status_roots("--fleet", fleet, "--root", b) == (0, [b], "")
    monkeypatch.setenv("EVEROS_ROOT", b)
    assert _status_roots() == (0, [b], "")
    for command in (["run", "reflect_episodes"], ["serve"]):
        help_text = CliRunner().invoke(cli, ["fleet", *command, "--help"]).stdout
        assert "--root" in help_text


def test_fleet_root_not_in_the_fleet_or_not_a_root_is_one_line(tmp_path: Path) -> None:
    a, = _bare_roots(tmp_path, "shard-a")
    (tmp_path / "elsewhere").mkdir()
    fleet = _fleet(tmp_path)
    code, _, err = _status_roots("--fleet", fleet, "--root", str(tmp_path / "elsewhere"))
    assert code == 1
    assert err == (f"error: {tmp_path}/elsewhere is not a root of the fleet "
                   f"{tmp_path}/fleet.toml (no pattern of its roots names it)\n")
    code, _, err = _status_roots("--root", a, "--root", str(tmp_path / "elsewhere"))
    assert code == 1 and len(err.splitlines()) == 1
    assert f"{tmp_path}/elsewhere is not a memory root" in err


def test_fleet_status_shows_a_root_with_a_line_break_on_one_line(tmp_path: Path) -> None:
    (root,) = _bare_roots(tmp_path, "shard\na")
    result = CliRunner().invoke(cli, ["fleet", "status", "--root", root])
    assert result.exit_code == 0, result.output
    assert f"{tmp_path}/shard\\na  " in result.stdout
    assert all(not line.startswith("a ") for line in result.stdout.splitlines())
