"""Migration 0017: set-aside rows a belief tier wrote before set-aside keys covered the prompts
and the model (kept under the bare text hash, like a consumed row) are told apart by their
run's audit row and dropped, so each such record is sent once more; every other row stays."""

from __future__ import annotations

from pathlib import Path

from everos_reflect.index import db as dbmod
from tests.db_support import system_db_at

OLD = "HTTP 413: too long; set aside: {ids} (sent again once edited)"
NEW = ("HTTP 413: too long; set aside: {ids} (sent again once edited, or the prompts or "
       "model change)")
LESSONS = ("HTTP 400: refused; set aside: {ids} (the 'deploy' tasks are sent again once "
           "edited)")


def test_old_set_aside_rows_are_dropped_once_and_consumed_rows_kept(root: Path) -> None:
    conn = system_db_at(root, "0016_id_watermarks_from_every_log")
    cursor, audit = [], []

    def run(strategy: str, user: str, run_id: str | None, status: str, error: str | None,
            rows: dict[str, str]) -> None:
        cursor.extend((strategy, "a", "p", user, i, h, run_id, "2026-12-01T00:00:00Z")
                      for i, h in rows.items())
        audit.append((f"dr_{len(audit)}", run_id, strategy, "a", "p", user, status,
                      None if error is None else error.format(ids=", ".join(rows))))

    run("detect_contradictions", "ada", "r1", "ok", None, {"wv_1": "h1"})  # consumed
    run("detect_contradictions", "ada", "r2", "failed", OLD, {"wv_2": "h2", "wv_3": "h3"})
    run("detect_contradictions", "ada", "r3", "failed", NEW, {"wv_4": "k4"})  # keyed already
    run("reflect_insights", "ada", "r4", "failed", OLD, {"ep_1": "h5"})
    run("reflect_insights", "ada", "r5", "failed", "HTTP 503: busy", {"ep_2": "h6"})
    run("learn_lessons", "bo", "r6", "failed", LESSONS, {"tk_1": "h7"})
    run("reconcile", "bo", None, "failed", OLD, {"rel_1": "h8"})  # a recovery's: no run id
    run("revalidate_insights", "bo", "r7", "failed", OLD, {"in_1": "d9"})  # its own keys
    # the same run id, another owner: that owner's window was consumed
    run("update_worldview", "cy", "r8", "failed", OLD, {"in_2": "h10"})
    cursor.append(("update_worldview", "a", "p", "dee", "in_3", "h11", "r8",
                   "2026-12-01T00:00:00Z"))
    audit.append(("dr_x", "r8", "update_worldview", "a", "p", "dee", "ok", None))
    with conn:
        conn.executemany("INSERT INTO change_cursor VALUES (?,?,?,?,?,?,?,?)", cursor)
        conn.executemany(
            "INSERT INTO derivation_report (id, run_id, strategy, app_id, project_id, "
            "owner_id, status, error, created_at) VALUES (?,?,?,?,?,?,?,?, "
            "'2026-12-01T00:00:00Z')", audit)

    conn.close()

    opened = dbmod.connect(root)  # the daemon, any command: the migration runs at open
    try:
        left = {r[0] for r in opened.execute("SELECT entry_id FROM change_cursor")}
        assert left == {"wv_1", "wv_4", "ep_2", "rel_1", "in_1", "in_3"}
        # once: a row set aside again under the old words later is not touched
        with opened:
            opened.execute("INSERT INTO change_cursor VALUES ('detect_contradictions', 'a', "
                           "'p', 'ada', 'wv_2', 'h2', 'r2', '2026-12-02T00:00:00Z')")
        assert dbmod.migrate(opened) == []
        assert opened.execute("SELECT count(*) FROM change_cursor").fetchone()[0] == 7
    finally:
        opened.close()
