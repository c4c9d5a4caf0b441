"""``--help`` of every command reads as one document: each option says what it is for, the
tenant options say what they default to for *that* command, and no source markup leaks.

A new user learns the CLI from ``--help``. ``runs --limit`` and ``task add --outcome`` were
listed bare; ``insights``, ``worldview``, ``relations`` and ``resolve`` said "App id
(default_app)" although without ``--user`` they read every app; and the fleet commands
printed reST's ``trigger`` double backticks as they are.
"""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest

from everos_reflect.cli.main import cli


def _commands(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from _commands(command, f"{path} ")
        yield path, command


COMMANDS = dict(_commands(cli))


def _help_text(path: str) -> str:
    command = COMMANDS[path]
    with click.Context(command, info_name=path) as ctx:
        return command.get_help(ctx)


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_option_says_what_it_is_for(path: str) -> None:
    bare = [p.opts[0] for p in COMMANDS[path].params
            if isinstance(p, click.Option) and not (p.help or "").strip()]
    assert bare == [], f"{path}: options without help: {bare}"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_help_shows_no_source_markup(path: str) -> None:
    assert "``" not in _help_text(path), path


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_tenant_defaults_match_whether_user_is_required(path: str) -> None:
    """With ``--user`` optional, ``--app``/``--project`` filter (None = every app); with it
    required, they default to the default tenant. The help says which."""
    params = {p.name: p for p in COMMANDS[path].params}
    user = params.get("user_id") or params.get("user")
    for name, default in (("app", "default_app"), ("project", "default_project")):
        option = params.get(name) or params.get(f"{name}_id")
        if option is None or user is None:
            continue
        text = option.help or ""
        if text.startswith("Only this"):  # a plain filter (search): nothing to default
            continue
        assert f"(default: {default}" in text or "(default: every" in text, (path, text)
        if not user.required:
            assert "every" in text, (path, name, text)
