"""``everos-reflect``: the command-line edge. Each command group lives in its own module."""

from __future__ import annotations

import click

from everos_reflect.cli import (
    belief_cmds,
    cluster_cmds,
    demo_cmds,
    engine_cmds,
    fleet_cmds,
    index_cmds,
    insight_cmds,
    memory_cmds,
    reflect_cmds,
    store_cmds,
)
from everos_reflect.cli.common import OneLineErrors, one_line_log_records


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="everos-reflect")
def cli() -> None:
    """Offline memory consolidation for AI agents: Markdown daily logs in, narratives out."""
    one_line_log_records()


for _module in (
    store_cmds,
    index_cmds,
    cluster_cmds,
    reflect_cmds,
    demo_cmds,
    engine_cmds,
    fleet_cmds,
    memory_cmds,
    belief_cmds,
    insight_cmds,
):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
