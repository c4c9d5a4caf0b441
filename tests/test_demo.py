"""`everos-reflect demo --json`: the README's first command, end to end on the example root.

Loads the real ONNX embedder and runs Reflection with the extractive provider, so it is slow.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli import demo_cmds
from everos_reflect.cli.main import cli
from everos_reflect.llm.extractive import split_sentences

EPISODES = 98  # memory_root_example: u_andrew 32, u_mei 21, u_nadia 24, u_sam 21


@pytest.mark.slow
def test_demo_json_runs_end_to_end_with_consistent_figures(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the kept temporary root goes under this test's own folder, not the machine's /tmp
    # (every run of the suite left a 2.3 MB copy there)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = CliRunner().invoke(cli, ["demo", "--json", "--keep"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    before, after = doc["before"], doc["after"]
    kept = Path(doc["root"])
    assert kept.is_dir() and kept.name == "root" and kept.parent.parent == tmp_path

    assert before["live"]["episode"] == EPISODES and before["users"] == 4
    assert before["archived"] == {"episode": 0, "atomic_fact": 0}
    assert len(before["clusters"]) >= 10
    assert all(c["size"] >= 2 for c in before["clusters"])
    assert all(h["parent_type"] == "memcell" and h["session_id"] for h in
               before["search"]["hits"])

    assert doc["run"]["status"] == "ok"
    assert after["merges"] >= 1 and after["provider"] == "extractive"
    rows = [line.split("|") for line in after["audit"].splitlines()]
    assert len(rows) == min(10, after["merges"] + sum(after["not_merged"].values()))
    db_rows = _audit_rows(kept)
    assert [r[0] for r in db_rows] == [r[0] for r in rows]
    merged_sources = sum(int(r[2]) for r in _all_reports(kept) if r[3])
    assert after["archived_episodes"] == merged_sources
    assert after["live"]["episode"] == EPISODES - merged_sources + after["merges"]
    assert after["archived_facts"] <= before["live"]["atomic_fact"]

    # The answer now comes from the narrative; the fragments it replaced are gone from search.
    # (A live August fragment outside the cluster's time window may still rank beside it.)
    hits = after["search"]["hits"]
    answer = hits[0]
    assert answer["parent_type"] == "cluster" and answer["session_id"] is None
    # An entry may answer with several passages: each item says which, so none is ambiguous.
    assert len({(h["id"], h["passage"]) for h in hits}) == len(hits)
    # The narrative shown in full is the merge that saved the most words (test_demo_shows_...
    # below), each sentence with the sources it stands for; the word totals cover every merge
    # of the run. (Offline, a merge of these hand-written Episodes saves words only where one
    # restates another; it keeps each detail, and adds each day's date.)
    narrative = after["narrative"]
    assert narrative["content"]
    assert len(narrative["provenance"]) == len(split_sentences(narrative["content"]))
    assert all(set(s["sources"]) <= set(narrative["sources"]) for s in narrative["provenance"])
    words = after["words"]
    assert 0 <= words["shorter"] <= after["merges"]
    assert (narrative["words"] < narrative["source_words"]) == (words["shorter"] > 0)
    assert words["sources"] >= narrative["source_words"] and words["narratives"] > 0
    # The answer's fragments left search with it.
    users = kept / "default_app/default_project/users"
    answered = next(e for e in _entries(users / "u_andrew") if e[0] == answer["id"])
    archived = set(answered[1])
    assert archived & {h["id"] for h in before["search"]["hits"]}
    assert not archived & {h["id"] for h in hits}
    # the narrative shown may be any user's, in any app (the one that saved the most words)
    user_dir = (kept / narrative["file"]).parents[1]
    assert user_dir.name == narrative["user_id"]
    assert (kept / narrative["file"]).read_text().count(narrative["id"]) >= 1
    assert narrative["id"] in {e[0] for e in _entries(user_dir)}
    assert doc["seconds"]["total"] > 0

    # One insight of the user with patterns across weeks, offline, with its dated evidence.
    found = doc["insight"]
    assert found["status"] == "ok" and found["written"] >= 1
    insight = found["insight"]
    assert insight["user_id"] == "u_nadia" and insight["provider"] == "extractive"
    assert len(insight["evidence"]) >= 2 and all(e["date"] for e in insight["evidence"])
    stored = (kept / "default_app/default_project/users/u_nadia/.insights").glob("*.md")
    assert any(insight["id"] in p.read_text() for p in stored)
    assert "provider = \"openai\"" in found["how"]


def _audit_rows(root: Path) -> list[tuple]:
    import sqlite3

    with sqlite3.connect(root / ".index" / "sqlite" / "system.db") as conn:
        return conn.execute(demo_cmds.AUDIT_SQL).fetchall()


def _all_reports(root: Path) -> list[tuple]:
    import sqlite3

    with sqlite3.connect(root / ".index" / "sqlite" / "system.db") as conn:
        return conn.execute("SELECT cluster_id, mode, source_count, merged_entry_id "
                            "FROM reflection_report WHERE status = 'ok'").fetchall()


def test_audit_text_prints_like_the_sqlite3_list_mode(tmp_path: Path) -> None:
    from everos_reflect.index import db as dbmod

    conn = dbmod.connect(tmp_path)
    with dbmod.transaction(conn):
        for n, merged in enumerate(["ep_20261130_0001", None]):
            conn.execute(
                "INSERT INTO reflection_report (id, app_id, project_id, owner_id, cluster_id, "
                "mode, source_count, source_members, merged_entry_id, status, created_at) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (f"rr_{n}", "a", "p", "u", f"cl_{n:012d}", "init", 3 - n, "[]", merged,
                 "ok" if merged else "rejected", f"2026-11-30T00:00:0{n}+00:00"))
    conn.close()
    assert demo_cmds.audit_text(tmp_path) == (
        "cl_000000000001|init|2|\n"
        "cl_000000000000|init|3|ep_20261130_0001\n")


def test_example_root_is_found_from_the_checkout() -> None:
    found = demo_cmds.example_root()
    assert found.name == "memory_root_example"
    assert (found / "default_app" / "default_project" / "users" / "u_andrew").is_dir()


def _entries(user_dir: Path) -> list[tuple[str, list[str]]]:
    """``(id, sources)`` of every entry in a user's episode logs, read with the product's parser."""
    from everos_reflect.markdown.parser import parse_log

    found = []
    for path in sorted((user_dir / "episodes").glob("*.md")):
        for entry in parse_log(path.read_text(), str(path)).entries:
            found.append((entry.id, list(entry.sources)))
    return found


def test_demo_shows_the_answer_when_it_saved_words_else_the_merge_that_saved_most() -> None:
    from everos_reflect.cli.demo_cmds import DEMO_USER, _narrative

    def doc(nid: str, user: str, words: int, source_words: int) -> dict[str, object]:
        return {"id": nid, "user_id": user, "words": words, "source_words": source_words}

    search = {"hits": [{"id": "ep_a", "parent_type": "cluster"}]}
    answer = doc("ep_a", DEMO_USER.user_id, 40, 50)
    best = doc("ep_b", "u_other", 20, 60)
    assert _narrative([answer, best], search) is answer  # the answer, as it saved words
    grown = doc("ep_a", DEMO_USER.user_id, 55, 50)
    assert _narrative([grown, best], search) is best
    # none saved words: the one that added the fewest, the demo user's on a tie
    other = doc("ep_c", "u_other", 72, 70)
    mine = doc("ep_d", DEMO_USER.user_id, 52, 50)
    assert _narrative([grown, other, mine], search) is mine
    assert _narrative([], search) is None


def test_demo_search_table_says_which_passage_a_repeated_id_is() -> None:
    """Search answers with several passages of one narrative: the demo's table names each
    further one as a passage of that entry (the same id was listed three times, unexplained)."""
    from rich.console import Console

    from everos_reflect.cli.demo_cmds import _Show

    def hit(passage: int, snippet: str) -> dict[str, object]:
        return {"id": "ep_20261206_0001", "subject": "Pets", "episode": "long narrative",
                "session_id": None, "snippet": snippet, "snippet_date": "2026-09-07",
                "passage": passage}

    show = _Show()
    show.console = Console(record=True, width=200, highlight=False)
    show._search("Search after", {"query": "pets", "user_id": "u_andrew",
                                  "hits": [hit(0, "Andrew adopted Toby."),
                                           hit(1, "Andrew adopted Buddy as well.")]})
    lines = show.console.export_text().splitlines()
    first = next(line for line in lines if "Toby" in line)
    second = next(line for line in lines if "Buddy" in line)
    assert "passage" not in first and "Pets: Andrew adopted Toby." in first
    assert "(passage 2 of this entry) 2026-09-07: Andrew adopted Buddy as well." in second
