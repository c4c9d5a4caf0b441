"""Commands of this group (filled in by the issue that owns it)."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
