"""Commands an agent's memory is read and fed through: ``mcp`` (and, as they land, task
records, lessons and the briefing)."""

from __future__ import annotations

import click

from everos_reflect.cli.common import handle_errors, open_runtime, root_option


@click.command("mcp")
@root_option
@handle_errors
def mcp_cmd(root: str | None) -> None:
    """Serve the memory tools over MCP on stdin/stdout (for agent clients)."""
    import anyio

    from everos_reflect.api.mcp_server import serve_stdio

    runtime = open_runtime(root)
    try:
        anyio.run(serve_stdio, runtime)
    finally:
        runtime.close()


COMMANDS = [mcp_cmd]
