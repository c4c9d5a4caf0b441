"""A Markdown file named like a daily log but for a date the calendar has not."""

from __future__ import annotations

from pathlib import Path

from everos_reflect.embedding import HashEmbedder
from everos_reflect.fleet.work import pending_work
from everos_reflect.index.sync import Indexer
from everos_reflect.lint import lint_report
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

LOG = ("---\ntype: episode_daily\nschema_version: 1\nuser_id: u1\ndate: '2026-02-28'\n---\n"
       "<!-- entry:ep_20260228_0001 -->\n---\nowner_id: u1\n"
       "timestamp: 2026-02-28T09:00:00+00:00\nparent_type: memcell\nparent_id: mc_1\n---\n"
       "## Subject\nA walk\n\n## Content\nWe walked.\n<!-- /entry:ep_20260228_0001 -->\n")


def test_a_log_named_for_no_calendar_date_is_named_by_lint_and_never_leaves_the_index_behind(
        root: Path) -> None:
    # episode-2026-02-30.md: listed as a log, never indexed (no day to index it under), so
    # `status` and a fleet's probe said "index behind by 1" for good, even right after a
    # reindex, and `lint` called it "not a daily log of any user" (in u1's episodes folder).
    episodes = root / "default_app/default_project/users/u1/episodes"
    episodes.mkdir(parents=True)
    (episodes / "episode-2026-02-28.md").write_text(LOG)
    (episodes / "episode-2026-02-30.md").write_text(LOG.replace("0228", "0230"))
    rt = Runtime(root, Settings(), embedder=HashEmbedder(16))
    try:
        indexer = Indexer(rt)
        indexer.reindex()
        assert indexer.pending()["files_changed"] == 0
        assert indexer.scan().files_seen == 1
        assert pending_work(rt, "reflect_episodes") is None
    finally:
        rt.close()
    report = lint_report(root)
    assert [(p["file"].rsplit("/", 1)[-1], p["message"], p["severity"])
            for p in report["problems"]] == [
        ("episode-2026-02-30.md", "not read: 2026-02-30 is no calendar date; the episodes "
         "folder's logs are named episode-YYYY-MM-DD.md", "warning")]


def test_a_log_outside_its_kinds_folder_is_named_by_lint_and_status(root: Path) -> None:
    # "Episodes/" (Linux tells the case apart), "insights/" without its dot, or the user's
    # folder itself: nothing reads such a log, and lint said "0 files checked, 0 errors"
    user = root / "default_app/default_project/users/u1"
    for rel in ("Episodes/episode-2026-02-28.md", "insights/insight-2026-02-28.md",
                "episode-2026-02-28.md", "episodes/episode-2026-02-28.md"):
        (user / rel).parent.mkdir(parents=True, exist_ok=True)
        (user / rel).write_text(LOG)
    (user / "notes").mkdir()
    (user / "notes" / "todo.md").write_text("not named like a log: left alone\n")
    report = lint_report(root)
    assert report["files_checked"] == 1
    assert sorted((p["file"].split("users/u1/")[1], p["message"], p["severity"])
                  for p in report["problems"]) == [
        ("Episodes/episode-2026-02-28.md",
         "not read: a log of episodes/ goes in the user's episodes/ folder", "warning"),
        ("episode-2026-02-28.md",
         "not read: a log of episodes/ goes in the user's episodes/ folder", "warning"),
        ("insights/insight-2026-02-28.md",
         "not read: a log of .insights/ goes in the user's .insights/ folder", "warning")]
    rt = Runtime(root, Settings(), embedder=HashEmbedder(16))
    try:
        Indexer(rt).scan()
        from everos_reflect.status import status_document

        doc = status_document(rt)
    finally:
        rt.close()
    assert len(doc["files_with_warnings"]) == 3
