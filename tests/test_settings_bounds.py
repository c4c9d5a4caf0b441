"""Every number and string of ``everos.toml`` (and its environment variables) has an upper
bound, and a value past it is refused naming the file, the key, the value and the range.

TOML writes finite floats up to 1.8e308 and integers of any size: ``time_window_days = 1e300``
was accepted as a window meaning "for ever" with nothing saying so, ``max_file_bytes = 10**30``
as a limit that kept no log out of memory, and a 200,000-character ``base_url`` or a
1,000,000-character ``token`` as if they could be sent."""

from __future__ import annotations

import pytest

from everos_reflect.errors import ConfigError
from everos_reflect.settings import packaged_text, parse_settings

DEFAULTS = packaged_text("default.toml")


def only_problem(user_text: str | None, env: dict[str, str] | None = None) -> tuple[str, str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_settings(DEFAULTS, user_text, env or {}, "root/everos.toml")
    [problem] = caught.value.problems
    return problem


@pytest.mark.parametrize(("section", "key", "value", "reason"), [
    ("clustering", "time_window_days", "1e300",
     "must be greater than 0 and at most 36,500 (a century of days), got 1e300"),
    ("clustering", "time_window_days", "36501",
     "must be greater than 0 and at most 36,500 (a century of days), got 36501"),
    ("index", "reconcile_interval_seconds", "1e300",
     "must be 1 to 604,800 (seconds; a week), got 1e300"),
    ("index", "optimize_interval_seconds", "604801",
     "must be 1 to 604,800 (seconds; a week), got 604801"),
    ("limits", "max_file_bytes", "100000000000000000000000",
     "must be 1,024 to 1,073,741,824 (bytes; 1 GiB), got 1.00e+23"),
    ("limits", "max_entry_bytes", "1073741825",
     "must be 1,024 to 1,073,741,824 (bytes; 1 GiB), got 1073741825"),
    ("limits", "max_request_bytes", "9223372036854775807",
     "must be 1,024 to 1,073,741,824 (bytes; 1 GiB), got 9.22e+18"),
])
def test_a_number_past_its_bound_is_refused_naming_key_value_and_range(
        section: str, key: str, value: str, reason: str) -> None:
    assert only_problem(f"[{section}]\n{key} = {value}\n") == (
        "root/everos.toml", f"{section}.{key}", reason)


@pytest.mark.parametrize(("section", "key", "value"), [
    ("clustering", "time_window_days", 36_500.0),
    ("index", "reconcile_interval_seconds", 604_800.0),
    ("index", "optimize_interval_seconds", 604_800.0),
    ("limits", "max_file_bytes", 1 << 30),
    ("limits", "max_entry_bytes", 1 << 30),
    ("limits", "max_request_bytes", 1 << 30),
])
def test_a_number_at_its_bound_is_taken(section: str, key: str, value: float) -> None:
    settings = parse_settings(DEFAULTS, f"[{section}]\n{key} = {value}\n", {}, "everos.toml")
    assert getattr(getattr(settings, section), key) == value


def test_the_environment_is_held_to_the_same_bound() -> None:
    name = "EVEROS_CLUSTERING__TIME_WINDOW_DAYS"
    assert only_problem(None, {name: "40000"}) == (
        "environment", name,
        "must be greater than 0 and at most 36,500 (a century of days), got 40000")
    # an exponent is not read from a variable, as no option reads one (``--timeout 1e3``)
    assert only_problem(None, {name: "1e300"}) == (
        "environment", name, "must be a number, got '1e300'")


@pytest.mark.parametrize("section", ["llm", "embedding"])
def test_a_base_url_longer_than_2048_characters_is_refused(section: str) -> None:
    url = "http://h/" + "a" * 200_000
    file, where, reason = only_problem(f'[{section}]\nbase_url = "{url}"\n')
    assert (file, where) == ("root/everos.toml", f"{section}.base_url")
    assert reason.startswith("must be a URL of at most 2,048 characters, got 'http://h/aaa")
    assert reason.endswith("(200,009 characters)")
    ok = "http://h/" + "a" * (2_048 - 9)
    settings = parse_settings(DEFAULTS, f'[{section}]\nbase_url = "{ok}"\n', {}, "everos.toml")
    assert getattr(settings, section).base_url == ok


def test_a_host_longer_than_a_dns_name_is_refused() -> None:
    file, where, reason = only_problem(f'[server]\nhost = "{"h" * 254}"\n')
    assert (file, where) == ("root/everos.toml", "server.host")
    assert reason.startswith("must be a host name or address of at most 253 characters")
    settings = parse_settings(DEFAULTS, f'[server]\nhost = "{"h" * 253}"\n', {}, "everos.toml")
    assert settings.server.host == "h" * 253


@pytest.mark.parametrize(("section", "key"), [("server", "token"), ("llm", "api_key"),
                                              ("embedding", "api_key")])
def test_a_secret_longer_than_4096_characters_is_refused_without_showing_it(
        section: str, key: str) -> None:
    secret = "s3cr3t" * 100_000
    assert only_problem(f'[{section}]\n{key} = "{secret}"\n') == (
        "root/everos.toml", f"{section}.{key}",
        "must be at most 4,096 characters, got 600,000 (the value is not shown: it is a "
        "secret)")
    fits = "t" * 4_096
    settings = parse_settings(DEFAULTS, f'[{section}]\n{key} = "{fits}"\n', {}, "everos.toml")
    assert getattr(getattr(settings, section), key) == fits
