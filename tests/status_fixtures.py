"""A memory root whose one daily log has a problem ``status`` reports, for the tests of what
``status`` shows of a file's problems (two test files built it line for line)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from everos_reflect.cli.main import cli

#: The log :func:`root_with_bad_log` writes, under the root.
BAD_LOG = "default_app/default_project/users/u1/episodes/episode-2026-10-12.md"


def root_with_bad_log(tmp_path: Path, *, indexed: bool = False) -> tuple[Path, CliRunner]:
    """A root made by ``init`` under ``tmp_path`` with :data:`BAD_LOG` holding frontmatter
    that is not valid YAML (a problem on line 2), and the runner that made it; ``indexed``:
    ``reindex`` has recorded the problem in the index."""
    root = tmp_path / "root"
    runner = CliRunner()
    assert runner.invoke(cli, ["init", str(root)]).exit_code == 0
    log = root / BAD_LOG
    log.parent.mkdir(parents=True)
    log.write_text("---\nuser_id: [unclosed\n---\n")
    if indexed:
        assert runner.invoke(cli, ["reindex", "--root", str(root)]).exit_code == 0
    return root, runner
