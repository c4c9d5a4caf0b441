"""A problem of a whole daily log names the file alone, as ``lint`` does.

``add`` to a log that is a symlink leading outside the root said ``error: …/episode-
2026-10-01.md:0: not writing this file: …``: no file has a line 0 (a refused undo, a lock
not had, a file that keeps changing said it too). A problem on a line still names it.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.errors import MarkdownError
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient

LOG = "default_app/default_project/users/u1/episodes/episode-2026-10-01.md"
WHY = "not writing this file: it is a symlink leading outside the memory root"


def test_an_add_to_a_log_linked_outside_the_root_names_the_file_not_line_0(
        root: Path, tmp_path: Path, rt: Runtime) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("kept\n", encoding="utf-8")
    log = root / LOG
    log.parent.mkdir(parents=True)
    log.symlink_to(outside)

    result = CliRunner().invoke(cli, [
        "add", "--root", str(root), "--user", "u1", "--subject", "s", "--content", "c",
        "--timestamp", "2026-10-01T10:00:00+00:00"])
    assert (result.exit_code, result.output.strip()) == (1, f"error: {LOG}: {WHY}")

    resp = ApiClient(rt)("POST", "/api/v1/memory/episodes", json={
        "user_id": "u1", "subject": "s", "content": "c",
        "timestamp": "2026-10-01T10:00:00+00:00"})
    assert (resp.status_code, resp.json()["error"]["message"]) == (409, f"{LOG}: {WHY}")
    assert outside.read_text(encoding="utf-8") == "kept\n"


def test_a_problem_on_a_line_still_names_it() -> None:
    assert str(MarkdownError("a.md", 12, "bad")) == "a.md:12: bad"
    assert str(MarkdownError("a.md", 0, "bad")) == "a.md: bad"
