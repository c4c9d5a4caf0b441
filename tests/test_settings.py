"""Settings: layering, validation (every problem at once, each naming file/key/reason), ome.toml."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from everos_reflect.errors import ConfigError
from everos_reflect.problem_words import shown_number
from everos_reflect.settings import (
    DEFAULT_FILE,
    ENV_FILE,
    Settings,
    everos_toml_template,
    load_ome,
    load_settings,
    packaged_text,
    parse_ome,
    parse_settings,
)

REPO = Path(__file__).resolve().parents[1]
DEFAULTS = packaged_text("default.toml")


def problems_of(user_text: str | None = None, env: dict[str, str] | None = None) -> list:
    with pytest.raises(ConfigError) as info:
        parse_settings(DEFAULTS, user_text, env or {}, "root/everos.toml")
    return info.value.problems


# --- shipped files ----------------------------------------------------------------------------


def test_shipped_defaults_equal_the_dataclass_defaults() -> None:
    assert parse_settings(DEFAULTS, None, {}, "everos.toml") == Settings()


@pytest.mark.parametrize("name", ["default.toml", "ome.toml"])
def test_top_level_config_copies_are_byte_identical_to_the_packaged_ones(name: str) -> None:
    packaged = (REPO / "everos_reflect" / "defaults" / name).read_bytes()
    assert (REPO / "config" / name).read_bytes() == packaged


def test_every_default_key_has_a_comment() -> None:
    for line in DEFAULTS.splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            assert "#" in line.split("=", 1)[1], line


def test_everos_toml_template_is_all_comments_and_names_every_key() -> None:
    template = everos_toml_template()
    assert tomllib.loads(template) == {}
    for section, table in tomllib.loads(DEFAULTS).items():
        assert f"# [{section}]" in template
        for key in table:
            assert f"# {key} = " in template
    # Uncommenting a whole section yields a valid override.
    uncommented = template.replace("# [server]", "[server]").replace("# port = 8000", "port = 9")
    assert parse_settings(DEFAULTS, uncommented, {}, "everos.toml").server.port == 9


def test_ome_template_has_reflection_disabled_and_optional_keys_commented() -> None:
    template = packaged_text("ome.toml")
    tables = parse_ome(template)
    assert tables["reflect_episodes"] == {"enabled": False}
    # every strategy in the template ships disabled, with only `enabled` set
    assert all(table == {"enabled": False} for table in tables.values())
    for line in ('# cron = "0 2 * * 1"', "# max_clusters_per_run = 10", "max_sources_per_merge"):
        assert line in template


# --- precedence -------------------------------------------------------------------------------


def test_user_file_overrides_defaults_and_env_overrides_both() -> None:
    user = '[clustering]\nthreshold = 0.7\n[llm]\nmodel = "from-file"\n'
    env = {"EVEROS_CLUSTERING__THRESHOLD": "0.8", "EVEROS_SERVER__PORT": "9001"}
    settings = parse_settings(DEFAULTS, user, env, "everos.toml")
    assert settings.clustering.threshold == 0.8  # env beats the file
    assert settings.llm.model == "from-file"  # the file beats the defaults
    assert settings.server.port == 9001
    assert settings.clustering.time_window_days == 7.0  # untouched default


def test_env_values_are_coerced_to_the_declared_types() -> None:
    env = {
        "EVEROS_LLM__API_KEY": "sk-test",
        "EVEROS_LLM__MAX_RETRIES": "5",
        "EVEROS_LLM__TIMEOUT_SECONDS": "2.5",
        "EVEROS_INDEX__SEARCH_MODE": "keyword",
    }
    settings = parse_settings(DEFAULTS, None, env, "everos.toml")
    assert settings.llm.api_key == "sk-test"
    assert settings.llm.max_retries == 5
    assert settings.llm.timeout_seconds == 2.5
    assert settings.index.search_mode == "keyword"


def test_env_vars_without_double_underscore_are_not_settings() -> None:
    env = {"EVEROS_ROOT": "/somewhere", "PATH": "/bin", "EVEROS_ANYTHING": "x"}
    assert parse_settings(DEFAULTS, None, env, "everos.toml") == Settings()


@pytest.mark.parametrize(("name", "meant"), [
    ("EVEROS_LLM_API_KEY", "EVEROS_LLM__API_KEY"),
    ("EVEROS_EMBEDDING_BATCH_SIZE", "EVEROS_EMBEDDING__BATCH_SIZE"),
    ("everos_server_token", None),  # not ours: the prefix is upper case
])
def test_a_setting_spelt_with_one_underscore_is_named_not_passed_over(
        name: str, meant: str | None) -> None:
    # EVEROS_LLM_API_KEY was read as no setting at all, as EVEROS_ROOT is: the key never
    # reached the LLM (every call 401) and lint said the configuration was fine
    env = {name: "sk-secret-value", "EVEROS_ROOT": "/somewhere"}
    if meant is None:
        assert parse_settings(DEFAULTS, None, env, "everos.toml") == Settings()
        return
    with pytest.raises(ConfigError) as info:
        parse_settings(DEFAULTS, None, env, "everos.toml")
    assert info.value.problems == [(
        "environment", name, "not read: a setting's variable has two underscores between "
        f"section and key (did you mean {meant}?)")]
    assert "sk-secret-value" not in str(info.value)


def test_empty_string_unsets_optional_values_and_ints_are_accepted_as_floats() -> None:
    user = '[server]\ntoken = "abc"\n[clustering]\ntime_window_days = 3\n'
    settings = parse_settings(DEFAULTS, user, {"EVEROS_SERVER__TOKEN": ""}, "everos.toml")
    assert settings.server.token is None
    assert settings.clustering.time_window_days == 3.0
    assert isinstance(settings.clustering.time_window_days, float)


def test_load_settings_reads_the_root_file_and_the_given_env(tmp_path: Path) -> None:
    assert load_settings(tmp_path, env={}) == Settings()
    (tmp_path / "everos.toml").write_text('[scheduler]\ntimezone = "Europe/Paris"\n')
    settings = load_settings(tmp_path, env={"EVEROS_EMBEDDING__THREADS": "2"})
    assert settings.scheduler.timezone == "Europe/Paris"
    assert settings.embedding.threads == 2


def test_settings_are_frozen() -> None:
    with pytest.raises(AttributeError):
        Settings().llm.model = "x"  # type: ignore[misc]


def test_server_is_loopback() -> None:
    user = '[server]\nhost = "0.0.0.0"\n'
    assert Settings().server.is_loopback
    assert not parse_settings(DEFAULTS, user, {}, "everos.toml").server.is_loopback


@pytest.mark.parametrize("host,loopback", [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("localhost", True),
    # a name that starts like a loopback address resolves wherever its DNS says: it needs a
    # token like any other host (it was taken for loopback by its first four characters)
    ("127.example.com", False), ("127.0.0.1.nip.io", False), ("0.0.0.0", False),
    ("10.0.0.1", False), ("::", False),
])
def test_only_literal_loopback_addresses_and_localhost_bind_without_a_token(
    host: str, loopback: bool
) -> None:
    user = f'[server]\nhost = "{host}"\n'
    assert parse_settings(DEFAULTS, user, {}, "everos.toml").server.is_loopback is loopback


# --- errors -----------------------------------------------------------------------------------


def test_every_problem_of_every_layer_is_reported_at_once() -> None:
    user = """
[llm]
provider = "anthropic"
timeout_seconds = 0
[clustering]
threshold = 1.5
treshold = 0.5
[server]
port = "8000"
[scheduler]
timezone = "Mars/Olympus"
[emedding]
model = "x"
"""
    env = {"EVEROS_SERVER__HOST": "", "EVEROS_INDEX__SEARCH_MODE": "fuzzy"}
    problems = problems_of(user, env)
    by_key = {key: (file, reason) for file, key, reason in problems}
    f = "root/everos.toml"
    assert by_key["llm.provider"] == (f, "must be one of: extractive, openai; got 'anthropic'")
    assert by_key["llm.timeout_seconds"] == (f, "must be greater than 0, got 0")
    assert by_key["clustering.threshold"] == (f, "must be in (0, 1], got 1.5")
    assert by_key["clustering.treshold"] == (f, "unknown key (did you mean 'threshold'?)")
    assert by_key["server.port"] == (f, 'must be an integer, got a string: "8000"')
    assert by_key["scheduler.timezone"][0] == f
    assert "unknown time zone 'Mars/Olympus'" in by_key["scheduler.timezone"][1]
    assert by_key["emedding"] == (f, "unknown section (did you mean 'embedding'?)")
    assert by_key["EVEROS_SERVER__HOST"] == (ENV_FILE, "must not be empty")
    assert by_key["EVEROS_INDEX__SEARCH_MODE"][0] == ENV_FILE
    assert len(problems) == 9


def test_config_error_message_names_file_key_and_reason() -> None:
    with pytest.raises(ConfigError) as info:
        parse_settings(DEFAULTS, "[server]\nport = 70000\n", {}, "/r/everos.toml")
    assert str(info.value) == (
        "invalid configuration: /r/everos.toml: server.port: "
        "must be a whole number from 1 to 65535, got 70000"
    )


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("EVEROS_SERVER__PORT", "eighty", "must be a whole number from 1 to 65535, got 'eighty'"),
        ("EVEROS_CLUSTERING__THRESHOLD", "high", "must be a number, got 'high'"),
        ("EVEROS_SERVER__PORT", "0", "must be a whole number from 1 to 65535, got '0'"),
        ("EVEROS_LLM__MAX_CONCURRENCY", "0", "must be 1 to 1000, got 0"),
        ("EVEROS_CLUSTERING__MEMBER_THRESHOLD", "1.5", "must be in [0, 1], got 1.5"),
        ("EVEROS_CLUSTERING__MEMBER_THRESHOLD", "-0.1", "must be in [0, 1], got -0.1"),
        ("EVEROS_LLM__APIKEY", "x", "unknown key llm.apikey (did you mean 'api_key'?)"),
        ("EVEROS_LMM__MODEL", "x", "unknown section 'lmm' (did you mean 'llm'?)"),
    ],
)
def test_env_problems_name_the_variable(name: str, value: str, reason: str) -> None:
    assert problems_of(env={name: value}) == [(ENV_FILE, name, reason)]


@pytest.mark.parametrize(("name", "value", "kind", "hint"), [
    ("EVEROS_SERVER__PORT", "80_80", "a whole number from 1 to 65535",
     "write it without '_' between digits"),
    ("EVEROS_SERVER__PORT", "\u0668\u0660", "a whole number from 1 to 65535",
     "write it with the digits 0-9"),
    ("EVEROS_LLM__MAX_RETRIES", "\uff13", "an integer", "write it with the digits 0-9"),
    ("EVEROS_LLM__TIMEOUT_SECONDS", "1_0.5", "a number", "write it without '_' between digits"),
    ("EVEROS_CLUSTERING__THRESHOLD", "0.\u0667", "a number", "write it with the digits 0-9"),
])
def test_env_numbers_with_separators_or_other_digits_are_refused(
        name: str, value: str, kind: str, hint: str) -> None:
    # int() and float() read "80_80" as 8080 and Arabic-Indic or full-width digits as
    # ASCII ones: a value nobody meant was taken silently
    assert problems_of(env={name: value}) == [
        (ENV_FILE, name, f"must be {kind}, got {value!r} ({hint})")]


@pytest.mark.parametrize("host", [" 127.0.0.1", "127.0.0.1\n", "local host", "0.0.0.0\t"])
def test_a_host_with_spaces_or_line_ends_is_refused_naming_it(host: str) -> None:
    # taken as written, " 127.0.0.1" was no loopback address (serve asked for a token) and,
    # with one, a name that did not resolve: neither message named the setting
    expected = f"must be a host name or address with no spaces, got {host!r}"
    assert problems_of(env={"EVEROS_SERVER__HOST": host}) == [
        (ENV_FILE, "EVEROS_SERVER__HOST", expected)]
    assert problems_of(f"[server]\nhost = {host!r}\n".replace("'", '"')) == [
        ("root/everos.toml", "server.host", expected)]


def test_non_finite_numbers_are_rejected() -> None:
    env = {"EVEROS_CLUSTERING__THRESHOLD": "nan"}
    problems = problems_of("[llm]\ntimeout_seconds = inf\n", env)
    assert problems == [
        ("root/everos.toml", "llm.timeout_seconds", "must be a finite number, got inf"),
        (ENV_FILE, "EVEROS_CLUSTERING__THRESHOLD", "must be a finite number, got nan"),
    ]


def test_an_llm_timeout_past_a_day_is_rejected() -> None:
    # 1e308 is finite and was accepted; every LLM call then died in the socket layer with
    # "OverflowError: timestamp out of range for platform time_t" instead of a config error.
    assert problems_of("[llm]\ntimeout_seconds = 1e308\n") == [
        ("root/everos.toml", "llm.timeout_seconds", "must be at most 86400 (a day), got 1e308")]
    ok = parse_settings(DEFAULTS, "[llm]\ntimeout_seconds = 86400\n", {}, "root/everos.toml")
    assert ok.llm.timeout_seconds == 86400


def test_a_bad_env_value_does_not_hide_a_bad_file_value() -> None:
    problems = problems_of("[server]\nport = -1\n", {"EVEROS_SERVER__PORT": "x"})
    said = "must be a whole number from 1 to 65535"
    assert ("root/everos.toml", "server.port", f"{said}, got -1") in problems
    assert (ENV_FILE, "EVEROS_SERVER__PORT", f"{said}, got 'x'") in problems


def test_wrong_types_are_rejected_including_bools_for_numbers() -> None:
    user = (
        "[llm]\nmax_retries = true\nmodel = 3\n"
        '[embedding]\nbatch_size = 1.5\n[index]\nsearch_mode = ["x"]\n'
    )
    reasons = {key: reason for _, key, reason in problems_of(user)}
    assert reasons == {
        "llm.max_retries": "must be an integer, got a boolean: true",
        "llm.model": "must be a string, got an integer: 3",
        "embedding.batch_size": "must be an integer, got a float: 1.5",
        "index.search_mode": 'must be a string, got an array: ["x"]',
    }


def test_toml_syntax_error_names_the_line_and_env_is_still_checked() -> None:
    user = '[llm]\nmodel = "ok"\nprovider = \n'
    problems = problems_of(user, {"EVEROS_SERVER__PORT": "nope"})
    file, key, reason = problems[0]
    assert (file, key) == ("root/everos.toml", "line 3")
    assert reason.startswith("TOML syntax error: ")
    assert "(at line" not in reason
    assert problems[1] == (ENV_FILE, "EVEROS_SERVER__PORT",
                           "must be a whole number from 1 to 65535, got 'nope'")


def test_misplaced_keys_get_a_hint() -> None:
    problems = problems_of('port = 9000\n[strategies.reflect_episodes]\nenabled = true\n')
    assert problems == [
        ("root/everos.toml", "port", "key outside any section; put it under [server]"),
        ("root/everos.toml", "strategies", "unknown section (strategies belong in ome.toml)"),
    ]


def test_section_given_as_a_value_is_rejected() -> None:
    assert problems_of('llm = "openai"\n') == [
        ("root/everos.toml", "llm", "must be a table [llm], not a single value")
    ]


def test_bad_url_is_rejected() -> None:
    problems = problems_of('[llm]\nbase_url = "localhost:8080"\n')
    assert problems == [
        (
            "root/everos.toml",
            "llm.base_url",
            "must be an http:// or https:// URL, got 'localhost:8080'",
        )
    ]


def test_a_broken_default_file_is_named_as_such() -> None:
    with pytest.raises(ConfigError) as info:
        parse_settings("[llm]\nmax_retries = -1\n", None, {}, "everos.toml")
    assert info.value.problems == [(DEFAULT_FILE, "llm.max_retries", "must be 0 to 100, got -1")]


def test_load_settings_reports_a_non_utf8_file(tmp_path: Path) -> None:
    (tmp_path / "everos.toml").write_bytes(b"[llm]\nmodel = \"\xff\"\n")
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, env={})
    assert info.value.problems == [(
        "everos.toml", "line 2", "file is not valid UTF-8: byte 0xff at column "
        "10 (invalid start byte; save it as UTF-8)")]


# --- ome.toml ---------------------------------------------------------------------------------


def test_parse_ome_returns_raw_strategy_tables() -> None:
    text = """
# mine
[strategies.reflect_episodes]
enabled = true
cron = "0 3 * * 0"
max_clusters_per_run = 5

[strategies.other]
anything = "goes"
"""
    assert parse_ome(text, "ome.toml") == {
        "reflect_episodes": {"enabled": True, "cron": "0 3 * * 0", "max_clusters_per_run": 5},
        "other": {"anything": "goes"},
    }
    assert parse_ome("", "ome.toml") == {}


def test_parse_ome_rejects_bad_shapes_all_at_once() -> None:
    text = 'strategy = 1\n[strategies]\nreflect_episodes = true\n[strategies.x]\nenabled = true\n'
    with pytest.raises(ConfigError) as info:
        parse_ome(text, "r/ome.toml")
    assert info.value.problems == [
        ("r/ome.toml", "strategy", "unknown top-level key (did you mean 'strategies'?); "
         "use [strategies.<name>]"),
        ("r/ome.toml", "strategies.reflect_episodes",
         "must be a table [strategies.<name>], got a boolean: true"),
    ]


def test_parse_ome_rejects_strategies_as_a_value() -> None:
    with pytest.raises(ConfigError) as info:
        parse_ome('strategies = "reflect_episodes"\n', "ome.toml")
    assert info.value.problems == [
        ("ome.toml", "strategies", "must be a table of [strategies.<name>] tables, got a "
         'string: "reflect_episodes"')
    ]


def test_parse_ome_syntax_error_names_file_and_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_ome("[strategies.reflect_episodes]\nenabled = tru\n", "r/ome.toml")
    [(file, key, reason)] = info.value.problems
    assert (file, key) == ("r/ome.toml", "line 2")
    assert reason.startswith("TOML syntax error")


def test_load_ome_missing_file_is_empty(tmp_path: Path) -> None:
    assert load_ome(tmp_path) == {}
    (tmp_path / "ome.toml").write_text("[strategies.reflect_episodes]\nenabled = true\n")
    assert load_ome(tmp_path) == {"reflect_episodes": {"enabled": True}}


@pytest.mark.parametrize("token", ["   ", " abc", "abc ", "s\u00e9cret", "tab\there"])
def test_a_token_no_client_can_send_is_refused_naming_the_key(token: str) -> None:
    # A blank token satisfied "a non-loopback host needs a token", then matched no request
    # (header values are trimmed; non-ASCII arrives as Latin-1): every call answered 401.
    with pytest.raises(ConfigError, match=r"/r/everos\.toml: server\.token: must be visible "
                                          r"ASCII characters without spaces"):
        parse_settings(DEFAULTS, f'[server]\ntoken = "{token}"\n', {}, "/r/everos.toml")
    assert parse_settings(DEFAULTS, '[server]\ntoken = "Ab.9-_~+/="\n', {},
                          "/r/everos.toml").server.token == "Ab.9-_~+/="


#: TOML that tomllib refuses with something other than TOMLDecodeError: nesting past Python's
#: recursion limit (RecursionError) and an integer of more than 4,300 digits (ValueError).
UNREADABLE_TOML = {
    "nested arrays": "[llm]\nmodel = " + "[" * 100_000 + "]" * 100_000 + "\n",
    "nested tables": "[llm]\nmodel = " + "{a = " * 5_000 + "1" + "}" * 5_000 + "\n",
    "long integer": "[server]\nport = 1" + "0" * 5_000 + "\n",
}


@pytest.mark.parametrize("text", UNREADABLE_TOML.values(), ids=UNREADABLE_TOML.keys())
def test_toml_too_deep_or_with_too_long_a_number_is_one_config_error(text: str) -> None:
    # Escaped as RecursionError / ValueError: every command printed a traceback thousands of
    # lines long, and serve died at start-up.
    ((file, _, reason),) = problems_of(text)
    assert file == "root/everos.toml" and reason.startswith("TOML syntax error: ")
    assert len(reason) < 300


@pytest.mark.parametrize("text", UNREADABLE_TOML.values(), ids=UNREADABLE_TOML.keys())
def test_an_unreadable_ome_toml_is_a_config_error_so_the_daemon_keeps_its_config(
        text: str) -> None:
    # The daemon's reload caught only ConfigError: this escaped it, status named no problem,
    # and serve died at start-up on such a file.
    with pytest.raises(ConfigError) as info:
        parse_ome(text.replace("[llm]", "[strategies.reflect_episodes]"), "root/ome.toml")
    ((file, _, reason),) = info.value.problems
    assert file == "root/ome.toml" and reason.startswith("TOML syntax error: ")


@pytest.mark.parametrize(("text", "key", "reason"), [
    # onnxruntime started 100,000 intra-op threads: `search` spun for minutes, never answering
    ("[embedding]\nthreads = 100000\n", "embedding.threads", "must be 0 (automatic) to 256"),
    # every embedding answer was to fill an array of (texts, 2**63 - 1) floats: a ValueError
    # traceback out of search, reindex and serve
    ("[embedding]\ndimensions = 9223372036854775807\n", "embedding.dimensions",
     "must be 1 to 65536"),
])
def test_embedding_sizes_past_what_can_run_are_rejected(text: str, key: str,
                                                        reason: str) -> None:
    ((file, shown, why),) = problems_of(text)
    assert (file, shown) == ("root/everos.toml", key) and why.startswith(reason)
    assert parse_settings(DEFAULTS, "[embedding]\nprovider = 'openai'\nthreads = 256\n"
                          "dimensions = 65536\n", {}, "root/everos.toml").embedding.threads == 256


def test_a_size_the_local_model_does_not_make_is_refused_naming_file_key_and_reason() -> None:
    # The bundled model makes 384-dimensional vectors whatever `dimensions` said: 768 was
    # accepted and ignored, with nothing in lint or status saying so.
    ((file, shown, why),) = problems_of("[embedding]\ndimensions = 768\n")
    assert (file, shown) == ("root/everos.toml", "embedding.dimensions")
    assert why.startswith("the local provider's model (all-MiniLM-L6-v2) makes "
                          "384-dimensional vectors, got 768: set 384 or remove the key")
    # the value is named where it was set; the provider may come from another layer
    ((file, shown, _),) = problems_of(
        '[embedding]\nprovider = "openai"\n',
        {"EVEROS_EMBEDDING__PROVIDER": "local", "EVEROS_EMBEDDING__DIMENSIONS": "1536"})
    assert (file, shown) == (ENV_FILE, "EVEROS_EMBEDDING__DIMENSIONS")
    # one problem per value: an out-of-range size is refused for its range alone
    assert [p[2] for p in problems_of("[embedding]\ndimensions = 0\n")] == [
        "must be 1 to 65536, got 0"]
    for text in ("[embedding]\ndimensions = 384\n",
                 '[embedding]\nprovider = "openai"\ndimensions = 768\n'):
        parse_settings(DEFAULTS, text, {}, "root/everos.toml")


def test_a_model_the_local_provider_does_not_run_is_refused_naming_file_key_and_reason() -> None:
    # The bundled all-MiniLM-L6-v2 ran whatever `model` said: another model name was accepted
    # and ignored, so a user believed they got it.
    ((file, shown, why),) = problems_of('[embedding]\nmodel = "all-mpnet-base-v2"\n')
    assert (file, shown) == ("root/everos.toml", "embedding.model")
    assert why.startswith("the local provider runs only its bundled model (all-MiniLM-L6-v2), "
                          "got 'all-mpnet-base-v2': set \"all-MiniLM-L6-v2\" or remove the key")
    # named where it was set, the provider coming from another layer; both keys at once
    problems = problems_of('[embedding]\nprovider = "openai"\nmodel = "text-embedding-3-small"\n'
                           'dimensions = 1536\n', {"EVEROS_EMBEDDING__PROVIDER": "local"})
    assert [(f, k) for f, k, _ in problems] == [("root/everos.toml", "embedding.dimensions"),
                                                ("root/everos.toml", "embedding.model")]
    # a blank name is refused for being blank alone
    assert [p[2] for p in problems_of('[embedding]\nmodel = " "\n')] == ["must not be empty"]
    # the bundled model under the names it goes by, and any model for the openai provider
    for name in ("all-MiniLM-L6-v2", "all-minilm-l6-v2", "sentence-transformers/all-MiniLM-L6-v2",
                 "all-MiniLM-L6-v2-int8", "local:all-MiniLM-L6-v2-int8"):
        assert parse_settings(DEFAULTS, f'[embedding]\nmodel = "{name}"\n', {},
                              "root/everos.toml").embedding.model == name
    parse_settings(DEFAULTS, '[embedding]\nprovider = "openai"\nmodel = "all-mpnet-base-v2"\n',
                   {}, "root/everos.toml")


def test_the_model_names_settings_accept_for_the_local_provider_are_the_bundled_models() -> None:
    from everos_reflect.embedding.local import LocalEmbedder
    from everos_reflect.settings import LOCAL_EMBEDDING_MODEL_NAMES

    assert Settings().embedding.model.lower() in LOCAL_EMBEDDING_MODEL_NAMES
    assert LocalEmbedder.name.lower() in LOCAL_EMBEDDING_MODEL_NAMES


def test_the_size_settings_hold_the_local_provider_to_is_the_models() -> None:
    from everos_reflect.embedding.local import DIM
    from everos_reflect.settings import LOCAL_EMBEDDING_DIMENSIONS

    assert DIM == LOCAL_EMBEDDING_DIMENSIONS == Settings().embedding.dimensions


@pytest.mark.parametrize(("text", "key", "reason"), [
    # every failing call retried for ever (30 s apart at most): the run never ended and held
    # its strategy's lock until a restart
    ("[llm]\nmax_retries = 1000000000\n", "llm.max_retries", "must be 0 to 100"),
    # one draft thread and connection per cluster selected, past the HTTP pool's 1,000
    ("[llm]\nmax_concurrency = 9223372036854775807\n", "llm.max_concurrency",
     "must be 1 to 1000"),
])
def test_llm_retries_and_concurrency_past_what_can_run_are_rejected(text: str, key: str,
                                                                    reason: str) -> None:
    ((file, shown, why),) = problems_of(text)
    assert (file, shown) == ("root/everos.toml", key) and why.startswith(reason)
    ok = parse_settings(DEFAULTS, "[llm]\nmax_retries = 100\nmax_concurrency = 1000\n", {},
                        "root/everos.toml")
    assert (ok.llm.max_retries, ok.llm.max_concurrency) == (100, 1000)


@pytest.mark.parametrize("value", ["0", "2049", "1000000000000000000000000000000"])
def test_an_embedding_batch_past_what_a_request_takes_is_rejected(value: str) -> None:
    ((file, shown, why),) = problems_of(f"[embedding]\nbatch_size = {value}\n")
    assert (file, shown, why) == ("root/everos.toml", "embedding.batch_size",
                                  f"must be 1 to 2048, got {shown_number(int(value))}")
    ok = parse_settings(DEFAULTS, "[embedding]\nbatch_size = 2048\n", {}, "root/everos.toml")
    assert ok.embedding.batch_size == 2048


@pytest.mark.parametrize("section", ["llm", "embedding"])
@pytest.mark.parametrize("key", ["ключ", "sk-abc\\r\\nX-Evil: 1", "sk abc", "sk-\\u0000"])
def test_an_api_key_no_http_header_can_carry_is_refused_naming_the_key(section: str,
                                                                       key: str) -> None:
    # Sent as the Authorization header: a non-ASCII key failed every call as "the response
    # body is not JSON ('ascii' codec can't encode ...)", a line break or NUL as "connection
    # failed", each retried, none naming the key.
    ((file, shown, why),) = problems_of(f'[{section}]\napi_key = "{key}"\n')
    assert (file, shown) == ("root/everos.toml", f"{section}.api_key")
    assert why.startswith("must be visible ASCII characters without spaces")


@pytest.mark.parametrize("section", ["llm", "embedding"])
@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/v1\\n", "http://h/v1\\u0000",
                                 "http://h/v 1", "http://h/v1\\t"])
def test_a_base_url_with_white_space_or_a_control_character_is_refused(section: str,
                                                                        url: str) -> None:
    # Only the start was matched: "http://host/v1\n" was accepted, and every run then failed
    # with httpx's "InvalidURL: Invalid non-printable ASCII character" naming no setting.
    ((file, shown, why),) = problems_of(f'[{section}]\nbase_url = "{url}"\n')
    assert (file, shown) == ("root/everos.toml", f"{section}.base_url")
    assert why.startswith("must be an http:// or https:// URL")


@pytest.mark.parametrize(("key", "value", "reason"), [
    # a full rescan (or LanceDB's compaction) back to back: a core busy, the index growing
    ("reconcile_interval_seconds", "1e-300", "must be 1 to 604,800 (seconds; a week)"),
    ("optimize_interval_seconds", "0.001", "must be 1 to 604,800 (seconds; a week)"),
    # an edit never indexed again, the pending events piling up in memory
    ("watch_debounce_seconds", "1e300", "must be 0 to 3600 (an hour)"),
    ("watch_debounce_seconds", "-1", "must be 0 to 3600 (an hour)"),
])
def test_the_daemons_background_periods_are_bounded(key: str, value: str, reason: str) -> None:
    ((file, shown, why),) = problems_of(f"[index]\n{key} = {value}\n")
    assert (file, shown) == ("root/everos.toml", f"index.{key}")
    assert why.startswith(reason), why
    ok = parse_settings(DEFAULTS, f"[index]\n{key} = 1\n", {}, "root/everos.toml")
    assert getattr(ok.index, key) == 1.0


@pytest.mark.parametrize("section", ["llm", "embedding"])
@pytest.mark.parametrize(("url", "reason"), [
    ("http://[::1/v1", "Invalid IPv6 URL"), ("http://h:abc/v1", "Port could not be cast"),
    ("http://h:99999/v1", "Port out of range"), ("http://:8080/v1", "no host"),
    ("http://alice:s3cr3t@h:0/v1", "port 0"),
])
def test_a_base_url_no_client_can_connect_to_is_refused(section: str, url: str,
                                                        reason: str) -> None:
    # The pattern checked only the characters: "http://[::1/v1" passed, then the HTTP client
    # refused it when the provider was built (`add` printed a traceback, `lint` said all
    # fine), and "http://h:99999/v1" failed every call as "connection failed".
    ((file, shown, why),) = problems_of(f'[{section}]\nbase_url = "{url}"\n')
    assert (file, shown) == ("root/everos.toml", f"{section}.base_url")
    assert why.startswith("must be an http:// or https:// URL") and reason in why, why
    assert "s3cr3t" not in why


def test_a_base_url_with_an_ipv6_host_or_a_port_is_accepted() -> None:
    text = '[llm]\nbase_url = "http://[::1]:8080/v1"\n[embedding]\nbase_url = "http://h:1/v1"\n'
    settings = parse_settings(DEFAULTS, text, {}, "root/everos.toml")
    assert settings.llm.base_url == "http://[::1]:8080/v1"


@pytest.mark.parametrize(("user_text", "env", "shown"), [
    ('[llm]\nbase_url = "https://alice:s3cr3t@llm.example/v1 "\n', {},
     "'https://***@llm.example/v1 '"),  # a space: no URL
    ('[embedding]\nbase_url = "ftp://alice:s3cr3t@emb.example/v1"\n', {},
     "'ftp://***@emb.example/v1'"),
    (None, {"EVEROS_LLM__BASE_URL": "alice:s3cr3t@llm.example/v1"}, "'***@llm.example/v1'"),
    ('[llm]\nbase_url = "http://alice:s3@cr/3t@llm.example/v1\\n"\n', {},
     "'http://***@llm.example/v1\\n'"),  # "@" and "/" in the password
    ('[llm]\nbase_url = ["https://alice:s3cr3t@llm.example/v1"]\n', {}, "not shown"),
    ('[llm]\nbase_url = "https://llm.example/v1?api_key=s3cr3t&tok s3 "\n', {},
     "'https://llm.example/v1?api_key=***&***'"),  # the key in the query string
], ids=["space", "scheme", "env-no-scheme", "at-in-password", "not-a-string", "query"])
def test_a_base_url_error_never_shows_its_credentials(user_text: str | None,
                                                      env: dict[str, str], shown: str) -> None:
    # "got 'https://alice:s3cr3t@llm.example/v1 '": the password was in the error every
    # command prints and `serve` logs
    ((_file, key, why),) = problems_of(user_text, env)
    assert key.lower().endswith("base_url") and why.startswith("must be ")
    assert "s3" not in why and "alice" not in why and shown in why, why


@pytest.mark.parametrize("key", ["llm.api_key", "embedding.api_key", "server.token"])
@pytest.mark.parametrize("value", ["987654321", '["sk-live-987654321"]', "9876.54321",
                                   '[[ "sk-live-987654321" ]]'])
def test_a_secret_of_the_wrong_type_is_refused_without_showing_it(key: str, value: str) -> None:
    # "must be a string, got int 987654321": a mistyped credential was echoed whole into the
    # error every command prints (and `serve` logs). A secret never appears in an error.
    section, name = key.split(".")
    ((file, shown, why),) = problems_of(f"[{section}]\n{name} = {value}\n")
    assert (file, shown) == ("root/everos.toml", key)
    assert why.startswith("must be a string, got ") and "not shown" in why
    assert "987654321" not in why and "9876.54321" not in why


def test_the_repr_of_settings_never_shows_a_secret() -> None:
    # A Settings in a log line or a traceback's locals must not carry the credentials.
    settings = parse_settings(DEFAULTS, '[llm]\napi_key = "sk-A1"\n[server]\ntoken = "t-B2"\n',
                              {"EVEROS_EMBEDDING__API_KEY": "sk-C3"})
    assert (settings.llm.api_key, settings.server.token) == ("sk-A1", "t-B2")
    assert settings.embedding.api_key == "sk-C3"
    shown = repr(settings)
    assert "sk-A1" not in shown and "t-B2" not in shown and "sk-C3" not in shown
    assert "model='gpt-4o-mini'" in shown


@pytest.mark.parametrize(("url", "shown"), [
    ("https://alice:s3cr3t@h/v1?api_key=s3&region=eu#s3", "https://***@h/v1?api_key=***&region=***#***"),
    ("https://h/v1?s3cr3t", "https://h/v1?***"),
    ("https://h/v1?", "https://h/v1?"),
    ("https://h/v1#s3", "https://h/v1#***"),
    ("https://h/v1", "https://h/v1"),
])
def test_redacted_url_hides_userinfo_query_values_and_fragment(url: str, shown: str) -> None:
    from everos_reflect.model import redacted_url

    assert redacted_url(url) == shown
