"""fleet.toml: parsing is pure and reports every problem at once; root patterns expand."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.errors import ConfigError, EverosError
from everos_reflect.fleet.config import parse_fleet, read_fleet, resolve_roots


def test_a_full_fleet_file_parses_into_its_values() -> None:
    config = parse_fleet(
        'roots = ["/data/shard-*", "extra"]\nray_address = "ray://head.local:10001"\n'
        "task_cpus = 0.5\nmax_retries = 5\nprobe_work = false\npoll_seconds = 1\n"
        "roots_per_worker = 3\n"
        "[strategies.reflect_episodes]\nenabled = true\ncron = \"0 3 * * 0\"\n",
        "/etc/fleet.toml")
    assert config.roots == ("/data/shard-*", "extra")
    assert config.ray_address == "ray://head.local:10001"
    assert (config.task_cpus, config.max_retries, config.probe_work) == (0.5, 5, False)
    assert config.poll_seconds == 1.0 and config.roots_per_worker == 3
    assert config.strategies == {"reflect_episodes": {"enabled": True, "cron": "0 3 * * 0"}}
    assert config.base_dir == Path("/etc")


def test_defaults_are_a_local_ray_one_cpu_per_root_and_three_retries() -> None:
    config = parse_fleet('roots = ["a"]')
    assert (config.ray_address, config.num_cpus, config.task_cpus, config.max_retries) == \
        ("", None, 1.0, 3)
    assert config.probe_work is True and config.strategies == {}
    assert config.roots_per_worker == 2  # a root's LLM waits are filled by another's work


def test_every_problem_is_reported_at_once_with_file_key_and_reason() -> None:
    text = ('roots = ["ok", ""]\nray_address = "http://x:1"\nnum_cpus = 0\ntask_cpus = -1\n'
            "max_retry = 2\nprobe_work = 1\nroots_per_worker = 17\n"
            "[strategies.reflect_episodes]\ncron = \"61 * * * *\"\nmax_clusters_per_run = 0\n"
            "[strategies.nope]\nenabled = true\n")
    with pytest.raises(ConfigError) as info:
        parse_fleet(text, "f.toml")
    where = {key: reason for file, key, reason in info.value.problems if file == "f.toml"}
    assert set(where) == {"roots[1]", "ray_address", "num_cpus", "task_cpus", "max_retry",
                          "probe_work", "roots_per_worker",
                          "strategies.reflect_episodes.cron",
                          "strategies.reflect_episodes.max_clusters_per_run", "strategies.nope"}
    assert "did you mean 'max_retries'" in where["max_retry"]
    assert "ray://host:port" in where["ray_address"]
    assert where["roots_per_worker"] == "must be at most 16, got 17"
    assert "unknown strategy" in where["strategies.nope"]


def test_missing_roots_and_a_syntax_error_name_the_place() -> None:
    with pytest.raises(ConfigError) as info:
        parse_fleet('ray_address = "auto"', "f.toml")
    assert info.value.problems == [("f.toml", "roots", "missing: list the memory roots "
                                                       "(paths or globs)")]
    with pytest.raises(ConfigError) as info:
        parse_fleet('roots = ["a"]\nx = = 1\n', "f.toml")
    assert info.value.problems[0][:2] == ("f.toml", "line 2")


def test_num_cpus_only_makes_sense_for_a_local_ray() -> None:
    with pytest.raises(ConfigError, match="only applies to a local Ray"):
        parse_fleet('roots = ["a"]\nray_address = "auto"\nnum_cpus = 4')
    assert parse_fleet('roots = ["a"]\nnum_cpus = 4').num_cpus == 4


def test_task_cpus_past_the_local_rays_num_cpus_is_refused() -> None:
    """A worker needs task_cpus on one node: more than the local Ray has, and fleet run
    waited for ever for a worker that could never start."""
    with pytest.raises(ConfigError) as info:
        parse_fleet('roots = ["a"]\nnum_cpus = 2\ntask_cpus = 4', "f.toml")
    [(file, key, reason)] = info.value.problems
    assert (file, key) == ("f.toml", "task_cpus")
    assert reason.startswith("must be at most num_cpus (2), got 4")
    assert parse_fleet('roots = ["a"]\nnum_cpus = 2\ntask_cpus = 2').task_cpus == 2.0


@pytest.mark.parametrize("value", ["1e-300", "0.01", "3601", "1e9", "1e300"])
def test_poll_seconds_outside_a_tenth_of_a_second_to_an_hour_is_refused(value: str) -> None:
    """fleet serve waits poll_seconds between ticks: 1e300 raised OverflowError out of the
    wait, 1e9 never submitted a run, and 1e-300 re-read every root's ome.toml in a busy loop."""
    with pytest.raises(ConfigError) as info:
        parse_fleet(f'roots = ["a"]\npoll_seconds = {value}', "f.toml")
    [(_, key, reason)] = info.value.problems
    assert key == "poll_seconds"
    assert reason.startswith("must be 0.1 to 3600 (an hour), got ")
    assert parse_fleet('roots = ["a"]\npoll_seconds = 3600').poll_seconds == 3600.0


@pytest.mark.parametrize(("line", "reason"), [
    ("task_cpus = 1e-300", "must be 0.0001 to 100,000, got 1e-300"),
    ("task_cpus = 0.00009", "must be 0.0001 to 100,000, got 0.00009"),  # as typed
    ("max_retries = 2147483648", "must be 0 to 100, got 2147483648"),
    ("max_retries = 101", "must be 0 to 100, got 101"),
    ("num_cpus = 1000000000000000", "must be 1 to 100,000, got 1.00e+15"),
])
def test_ray_settings_ray_would_refuse_are_config_errors_naming_the_key(
        line: str, reason: str) -> None:
    """Ray raised on them when the first worker started: a ValueError (task_cpus finer than
    Ray's 0.0001), an OverflowError (a retry count past 32 bits) or "cannot start a local
    Ray" (num_cpus past 1e14): a traceback or an error naming no key."""
    with pytest.raises(ConfigError) as info:
        parse_fleet(f'roots = ["a"]\n{line}', "f.toml")
    assert info.value.problems == [("f.toml", line.split(" =")[0], reason)]


def test_ray_settings_at_their_bounds_are_taken() -> None:
    config = parse_fleet('roots = ["a"]\ntask_cpus = 0.0001\nmax_retries = 100\n'
                         "num_cpus = 100000")
    assert (config.task_cpus, config.max_retries, config.num_cpus) == (0.0001, 100, 100_000)


def test_an_oversized_file_is_refused_before_parsing() -> None:
    with pytest.raises(ConfigError, match="larger than"):
        parse_fleet("# " + "x" * (1 << 20))


def test_globs_expand_relative_to_the_fleet_file_once_each_in_order(tmp_path: Path) -> None:
    for name in ("shard-2", "shard-1", "extra"):
        (tmp_path / name / ".index").mkdir(parents=True)
    (tmp_path / "shard-file").write_text("not a folder")
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(f'roots = ["shard-*", "extra", "{tmp_path}/shard-1"]\n')
    _, roots = read_fleet(fleet)
    assert roots == [tmp_path / "shard-1", tmp_path / "shard-2", tmp_path / "extra"]


def test_patterns_that_match_nothing_are_all_reported(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    config = parse_fleet('roots = ["missing", "gone-*", "file"]', str(tmp_path / "f.toml"))
    with pytest.raises(ConfigError) as info:
        resolve_roots(config)
    assert [(k, r.split("' ")[-1]) for _, k, r in info.value.problems] == [
        ("roots[0]", "does not exist"), ("roots[1]", "matches no folder"),
        ("roots[2]", "is not a folder")]


def test_a_root_that_is_a_symlink_loop_is_reported_as_one_not_as_missing(
        tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "dangling").symlink_to("gone")
    config = parse_fleet('roots = ["loop", "a", "a/shard", "dangling"]',
                         str(tmp_path / "f.toml"))
    with pytest.raises(ConfigError) as info:
        resolve_roots(config)
    assert [(k, r) for _, k, r in info.value.problems] == [
        ("roots[0]", "'loop' is a symlink loop"), ("roots[1]", "'a' is a symlink loop"),
        ("roots[2]", "'a/shard' runs into a symlink loop"),
        ("roots[3]", "'dangling' is a symlink to 'gone', which does not exist")]


def test_a_folder_that_is_no_memory_root_is_refused_by_name_and_left_untouched(
        tmp_path: Path) -> None:
    """Any folder was a root: a fleet run gave it an .index/ and reported it ok."""
    for name in ("plain", "shard-1", "shard-2"):
        (tmp_path / name).mkdir()
    (tmp_path / "shard-2" / "notes.txt").write_text("mine")
    (tmp_path / "shard-1" / "ome.toml").write_text("")  # a root
    config = parse_fleet('roots = ["plain", "shard-*"]', str(tmp_path / "f.toml"))
    with pytest.raises(ConfigError) as info:
        resolve_roots(config)
    why = ("is not a memory root (it has no everos.toml, ome.toml, .index/ or "
           "<app>/<project>/users/ folder; `everos-reflect init` makes one)")
    assert [(k, r) for _, k, r in info.value.problems] == [
        ("roots[0]", f"'plain' {why}"),
        ("roots[1]", f"{str(tmp_path / 'shard-2')!r} (matched by 'shard-*') {why}")]
    assert list((tmp_path / "plain").iterdir()) == []
    assert [p.name for p in (tmp_path / "shard-2").iterdir()] == ["notes.txt"]


def test_a_folder_holding_the_spec_layout_is_a_root_without_any_marker(tmp_path: Path) -> None:
    (tmp_path / "shard" / "default_app" / "default_project" / "users").mkdir(parents=True)
    config = parse_fleet('roots = ["shard"]', str(tmp_path / "f.toml"))
    assert resolve_roots(config) == [tmp_path / "shard"]


def test_a_missing_fleet_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EverosError, match="no fleet file at"):
        read_fleet(tmp_path / "nope.toml")


@pytest.mark.parametrize("text", [
    "roots = " + "[" * 100_000 + "]" * 100_000,
    'roots = ["a"]\nnum_cpus = 1' + "0" * 5_000,
])
def test_toml_too_deep_or_with_too_long_a_number_is_one_config_error(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_fleet(text, "f.toml")
    ((file, _, reason),) = info.value.problems
    assert file == "f.toml" and reason.startswith("TOML syntax error: ")


def test_a_root_inside_another_root_is_refused_naming_both(tmp_path: Path) -> None:
    # each looks like a root (the inner one got an .index/ from an earlier run there)
    (tmp_path / "shard-a" / "default_app" / "default_project" / ".index").mkdir(parents=True)
    (tmp_path / "shard-a" / ".index").mkdir()
    (tmp_path / "shard-b" / ".index").mkdir(parents=True)
    config = parse_fleet('roots = ["shard-*", "shard-a/default_app/*"]\n',
                         str(tmp_path / "fleet.toml"))
    with pytest.raises(ConfigError) as caught:
        resolve_roots(config)
    inner, outer = tmp_path / "shard-a/default_app/default_project", tmp_path / "shard-a"
    assert caught.value.problems == [
        (str(tmp_path / "fleet.toml"), "roots[1]",
         f"{str(inner)!r} is inside the root {str(outer)!r} (roots[0]); a memory root holds "
         "no other root")]
    assert sorted(p.name for p in inner.iterdir()) == [".index"]  # nothing made in it


def test_roots_side_by_side_or_sharing_a_name_prefix_are_not_nested(tmp_path: Path) -> None:
    for name in ("shard", "shard-2", "other/shard"):
        (tmp_path / name / ".index").mkdir(parents=True)
    config = parse_fleet('roots = ["shard", "shard-2", "other/shard"]\n',
                         str(tmp_path / "fleet.toml"))
    assert resolve_roots(config) == [tmp_path / "shard", tmp_path / "shard-2",
                                     tmp_path / "other" / "shard"]


def test_a_root_or_fleet_file_under_an_unknown_users_home_is_a_config_problem(
        tmp_path: Path) -> None:
    """`~nobody/shard` in roots (or as --fleet): pathlib's bare RuntimeError escaped as a
    traceback, and out of `fleet serve`'s rescan as a failed tick."""
    config = parse_fleet('roots = ["~no-such-user-everos/shard", "missing"]',
                         str(tmp_path / "f.toml"))
    with pytest.raises(ConfigError) as info:
        resolve_roots(config)
    assert [(k, r) for _, k, r in info.value.problems] == [
        ("roots[0]", "'~no-such-user-everos/shard': no home folder is known for "
                     "'~no-such-user-everos'"),
        ("roots[1]", "'missing' does not exist")]
    with pytest.raises(EverosError, match="no home folder is known"):
        read_fleet("~no-such-user-everos/fleet.toml")


@pytest.mark.parametrize(("text", "key", "reason"), [
    # 1e300 was accepted and left to Ray, which no node could ever satisfy
    ("task_cpus = 1e300", "task_cpus", "must be 0.0001 to 100,000, got 1e300"),
    ("task_cpus = 100001", "task_cpus", "must be 0.0001 to 100,000, got 100001"),
])
def test_task_cpus_past_any_machine_is_refused_naming_the_range(text: str, key: str,
                                                                reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_fleet(f'roots = ["a"]\n{text}\n', "f.toml")
    assert info.value.problems == [("f.toml", key, reason)]
    assert parse_fleet('roots = ["a"]\nnum_cpus = 100000\ntask_cpus = 100000').task_cpus == \
        100_000.0


def test_a_ray_address_or_root_longer_than_any_host_or_path_is_refused() -> None:
    long_address = "ray://" + "h" * 100_000 + ":10001"
    with pytest.raises(ConfigError) as info:
        parse_fleet(f'roots = ["{"r" * 4_097}", "{"r" * 4_096}"]\n'
                    f'ray_address = "{long_address}"\n', "f.toml")
    where = {key: reason for _, key, reason in info.value.problems}
    assert set(where) == {"roots[0]", "ray_address"}
    assert where["roots[0]"].startswith("must be a path of at most 4,096 characters, got 'rrr")
    assert where["roots[0]"].endswith("(4,097 characters)")
    assert where["ray_address"].startswith("must be at most 300 characters, got 'ray://hhh")
    assert where["ray_address"].endswith("(100,012 characters)")
