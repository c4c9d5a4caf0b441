"""``system.db``: derived index state plus the coordination state of the daemon.

Migrations are named and append-only; each runs in its own transaction and is recorded in
``schema_migrations``, so an old database is brought forward step by step and a blank one is
built the same way. Never edit a shipped migration: add a new one.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from everos_reflect.errors import IndexUnavailable, IndexUnreadable
from everos_reflect.fileio import error_text, not_a_folder
from everos_reflect.model import shown_path

_log = logging.getLogger(__name__)

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_sync_state",
        """
        CREATE TABLE files (
            path        TEXT PRIMARY KEY,      -- relative to the memory root, POSIX separators
            app_id      TEXT NOT NULL,
            project_id  TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            kind        TEXT NOT NULL,
            mtime_ns    INTEGER NOT NULL,
            size        INTEGER NOT NULL,
            sha256      TEXT NOT NULL,
            problems    TEXT NOT NULL DEFAULT '[]',   -- JSON list of diagnostics
            synced_at   TEXT NOT NULL
        );
        CREATE TABLE entries (
            app_id        TEXT NOT NULL,
            project_id    TEXT NOT NULL,
            user_id       TEXT NOT NULL,
            id            TEXT NOT NULL,
            kind          TEXT NOT NULL,
            path          TEXT NOT NULL,
            owner_id      TEXT,
            ts            REAL,              -- epoch seconds of `timestamp`, for ordering
            timestamp     TEXT,
            subject       TEXT NOT NULL DEFAULT '',
            text          TEXT NOT NULL DEFAULT '',
            parent_type   TEXT,
            parent_id     TEXT,
            session_id    TEXT,
            sources       TEXT NOT NULL DEFAULT '[]',  -- JSON list
            deprecated_by TEXT,
            content_hash  TEXT NOT NULL,
            text_hash     TEXT NOT NULL,
            embed_model   TEXT,
            PRIMARY KEY (app_id, project_id, user_id, id)
        );
        CREATE INDEX entries_by_path ON entries(path);
        CREATE INDEX entries_by_user_kind ON entries(app_id, project_id, user_id, kind, ts);
        CREATE INDEX entries_by_parent ON entries(app_id, project_id, user_id, parent_id);
        """,
    ),
    (
        "0002_clusters",
        """
        CREATE TABLE clusters (
            cluster_id      TEXT PRIMARY KEY,
            app_id          TEXT NOT NULL,
            project_id      TEXT NOT NULL,
            user_id         TEXT NOT NULL,
            centroid        BLOB NOT NULL,     -- float32 little-endian, L2-normalised
            member_count    INTEGER NOT NULL,
            first_ts        REAL NOT NULL,
            last_ts         REAL NOT NULL,
            consolidated_entry_id TEXT,        -- the live narrative, when consolidated
            consolidated_at TEXT,
            created_at      TEXT NOT NULL
        );
        CREATE INDEX clusters_by_user_time ON clusters(app_id, project_id, user_id, last_ts);
        CREATE TABLE cluster_members (
            app_id      TEXT NOT NULL,
            project_id  TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            entry_id    TEXT NOT NULL,
            cluster_id  TEXT NOT NULL REFERENCES clusters(cluster_id) ON DELETE CASCADE,
            ts          REAL NOT NULL,
            similarity  REAL,
            joined_at   TEXT NOT NULL,
            PRIMARY KEY (app_id, project_id, user_id, entry_id)
        );
        CREATE INDEX cluster_members_by_cluster ON cluster_members(cluster_id, ts);
        """,
    ),
    (
        "0003_reflection_report",
        """
        CREATE TABLE reflection_report (
            id                    TEXT PRIMARY KEY,
            run_id                TEXT,
            app_id                TEXT NOT NULL,
            project_id            TEXT NOT NULL,
            owner_id              TEXT NOT NULL,
            cluster_id            TEXT NOT NULL,
            mode                  TEXT NOT NULL CHECK (mode IN ('init', 'update')),
            source_count          INTEGER NOT NULL,
            source_members        TEXT NOT NULL,      -- JSON list of entry ids
            merged_entry_id       TEXT,
            deprecated_fact_count INTEGER NOT NULL DEFAULT 0,
            new_fact_count        INTEGER NOT NULL DEFAULT 0,
            fact_coverage         REAL,
            provider              TEXT,
            model                 TEXT,
            prompt_tokens         INTEGER,
            completion_tokens     INTEGER,
            duration_ms           INTEGER,
            status                TEXT NOT NULL,      -- ok | skipped | rejected | failed | undone
            error                 TEXT,
            created_at            TEXT NOT NULL       -- ISO 8601 UTC, microseconds: sortable
        );
        CREATE INDEX reflection_report_by_time ON reflection_report(created_at);
        CREATE INDEX reflection_report_by_merged ON reflection_report(merged_entry_id);
        """,
    ),
    (
        "0004_runs",
        """
        CREATE TABLE runs (
            id           TEXT PRIMARY KEY,
            strategy     TEXT NOT NULL,
            trigger      TEXT NOT NULL,       -- cron | manual | api | startup-catchup | data
            started_at   TEXT NOT NULL,
            finished_at  TEXT,
            status       TEXT NOT NULL,       -- running | ok | failed | abandoned
            error        TEXT,
            attempt      INTEGER NOT NULL DEFAULT 1,
            counts       TEXT NOT NULL DEFAULT '{}',  -- JSON
            pid          INTEGER
        );
        CREATE INDEX runs_by_strategy ON runs(strategy, started_at);
        CREATE TABLE strategy_state (
            strategy     TEXT PRIMARY KEY,
            state        TEXT NOT NULL DEFAULT '{}'   -- JSON: trigger counters, last due, ...
        );
        """,
    ),
    (
        "0005_merge_journal",
        """
        -- One row per merge in flight: written before the first Markdown write, removed after
        -- the last, so a crash can be rolled forward or abandoned at the next start.
        CREATE TABLE merge_journal (
            id           TEXT PRIMARY KEY,
            app_id       TEXT NOT NULL,
            project_id   TEXT NOT NULL,
            user_id      TEXT NOT NULL,
            cluster_id   TEXT NOT NULL,
            plan         TEXT NOT NULL,       -- JSON: everything needed to finish or abandon
            step         TEXT NOT NULL,
            created_at   TEXT NOT NULL
        );
        """,
    ),
    (
        "0006_cluster_state",
        """
        -- Length of the (unnormalised) mean, so the running mean stays exact.
        ALTER TABLE clusters ADD COLUMN centroid_norm REAL NOT NULL DEFAULT 1.0;
        -- A member replaced by a narrative stays listed (history) but is no longer live.
        ALTER TABLE cluster_members ADD COLUMN deprecated_by TEXT;
        -- Text the member was clustered with: a changed text means reassign.
        ALTER TABLE cluster_members ADD COLUMN text_hash TEXT;
        CREATE INDEX clusters_consolidated ON clusters(app_id, project_id, user_id)
            WHERE consolidated_entry_id IS NOT NULL;
        """,
    ),
    (
        "0007_derivation_report",
        """
        -- One audit row per derivation of any strategy (SPEC §10); reflection_report stays.
        CREATE TABLE derivation_report (
            id                TEXT PRIMARY KEY,
            run_id            TEXT,
            strategy          TEXT NOT NULL,
            app_id            TEXT NOT NULL,
            project_id        TEXT NOT NULL,
            owner_id          TEXT NOT NULL,
            inputs            TEXT NOT NULL DEFAULT '[]',   -- JSON list of entry ids
            outputs           TEXT NOT NULL DEFAULT '[]',   -- JSON list of entry ids
            status            TEXT NOT NULL,  -- ok | skipped | failed | limit | stale | ...
            provider          TEXT,
            model             TEXT,
            prompt_tokens     INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            duration_ms       INTEGER,
            error             TEXT,
            created_at        TEXT NOT NULL   -- ISO 8601 UTC, microseconds: sortable
        );
        CREATE INDEX derivation_report_by_time ON derivation_report(created_at);
        CREATE INDEX derivation_report_by_strategy ON derivation_report(strategy, created_at);
        """,
    ),
    (
        "0008_change_cursors",
        """
        -- What each strategy has consumed of its "changes" sources, per owner: an entry id with
        -- the hash of the text the strategy saw (an edited text is new again). Coordination
        -- state like runs: reindex keeps it.
        CREATE TABLE change_cursor (
            strategy    TEXT NOT NULL,
            app_id      TEXT NOT NULL,
            project_id  TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            entry_id    TEXT NOT NULL,
            text_hash   TEXT NOT NULL,
            run_id      TEXT,
            consumed_at TEXT NOT NULL,
            PRIMARY KEY (strategy, app_id, project_id, user_id, entry_id, text_hash)
        );
        """,
    ),
    (
        "0009_cluster_versions",
        """
        -- Bumped by every change to a user's clusters, whoever makes it: the clustering
        -- service keeps each user's centroids in memory and reloads them when this moved.
        CREATE TABLE cluster_versions (
            app_id      TEXT NOT NULL,
            project_id  TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            version     INTEGER NOT NULL,
            PRIMARY KEY (app_id, project_id, user_id)
        );
        CREATE TRIGGER clusters_version_insert AFTER INSERT ON clusters BEGIN
            INSERT INTO cluster_versions (app_id, project_id, user_id, version)
            VALUES (NEW.app_id, NEW.project_id, NEW.user_id, 1)
            ON CONFLICT (app_id, project_id, user_id) DO UPDATE SET version = version + 1;
        END;
        CREATE TRIGGER clusters_version_update AFTER UPDATE ON clusters BEGIN
            INSERT INTO cluster_versions (app_id, project_id, user_id, version)
            VALUES (NEW.app_id, NEW.project_id, NEW.user_id, 1)
            ON CONFLICT (app_id, project_id, user_id) DO UPDATE SET version = version + 1;
        END;
        CREATE TRIGGER clusters_version_delete AFTER DELETE ON clusters BEGIN
            INSERT INTO cluster_versions (app_id, project_id, user_id, version)
            VALUES (OLD.app_id, OLD.project_id, OLD.user_id, 1)
            ON CONFLICT (app_id, project_id, user_id) DO UPDATE SET version = version + 1;
        END;
        """,
    ),
    (
        "0010_commit_intents",
        """
        -- A derived tier's commit in flight: written before its Markdown write, deleted in the
        -- transaction that moves the cursor, so recovery knows the exact window a crashed
        -- commit consumed even when new records arrived since. Coordination state: reindex
        -- keeps it.
        CREATE TABLE commit_intent (
            strategy    TEXT NOT NULL,
            app_id      TEXT NOT NULL,
            project_id  TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            key         TEXT NOT NULL,      -- the window key its outputs carry (derivation)
            items       TEXT NOT NULL,      -- JSON {entry id: text hash}: the window
            run_id      TEXT,
            created_at  TEXT NOT NULL,
            PRIMARY KEY (strategy, app_id, project_id, user_id, key)
        );
        """,
    ),
    (
        "0011_cluster_keys",
        """
        -- Cluster ids are hashes, so an index on them takes each new row on a random page: a
        -- commit of one index batch dirtied more pages the longer the history grew. Clusters
        -- now also get an integer key in creation order, and members are indexed (and
        -- cascade-deleted) by it: a batch's member rows land at the index's end, among the
        -- recent clusters they join. cluster_id stays the public id (and members keep it).
        ALTER TABLE clusters ADD COLUMN cluster_key INTEGER;
        UPDATE clusters SET cluster_key = rowid;
        CREATE UNIQUE INDEX clusters_by_key ON clusters(cluster_key);
        CREATE TABLE cluster_members_keyed (
            app_id        TEXT NOT NULL,
            project_id    TEXT NOT NULL,
            user_id       TEXT NOT NULL,
            entry_id      TEXT NOT NULL,
            cluster_id    TEXT NOT NULL,
            cluster_key   INTEGER NOT NULL REFERENCES clusters(cluster_key) ON DELETE CASCADE,
            ts            REAL NOT NULL,
            similarity    REAL,
            joined_at     TEXT NOT NULL,
            deprecated_by TEXT,
            text_hash     TEXT,
            PRIMARY KEY (app_id, project_id, user_id, entry_id)
        );
        INSERT INTO cluster_members_keyed
            SELECT m.app_id, m.project_id, m.user_id, m.entry_id, m.cluster_id, c.cluster_key,
                   m.ts, m.similarity, m.joined_at, m.deprecated_by, m.text_hash
            FROM cluster_members m JOIN clusters c ON c.cluster_id = m.cluster_id;
        DROP TABLE cluster_members;
        ALTER TABLE cluster_members_keyed RENAME TO cluster_members;
        CREATE INDEX cluster_members_by_cluster ON cluster_members(cluster_key, ts);
        """,
    ),
    (
        "0012_clusters_by_key",
        """
        -- The clusters table itself was keyed by the hash id (a unique index beside the rowid
        -- table), so every new cluster took an entry on a random page of that index: a commit
        -- of one index batch dirtied ~one page per new cluster once the history was large,
        -- and its cost grew with the history. Now the integer key in creation order is the
        -- rowid (no separate key index), and the hash id is indexed behind its key's bucket
        -- of 4096 (cluster_key >> 12): new ids land among the newest bucket's few pages. A
        -- look-up by id probes each bucket (CLUSTER_KEY_OF_ID: ~25 probes at 100k clusters).
        -- Ids stay unique by construction (the service gives the first id a user does not
        -- hold); members are copied first so dropping the old table cascades to nothing.
        CREATE TABLE clusters_new (
            cluster_key           INTEGER PRIMARY KEY,
            cluster_id            TEXT NOT NULL,
            app_id                TEXT NOT NULL,
            project_id            TEXT NOT NULL,
            user_id               TEXT NOT NULL,
            centroid              BLOB NOT NULL,
            centroid_norm         REAL NOT NULL DEFAULT 1.0,
            member_count          INTEGER NOT NULL,
            first_ts              REAL NOT NULL,
            last_ts               REAL NOT NULL,
            consolidated_entry_id TEXT,
            consolidated_at       TEXT,
            created_at            TEXT NOT NULL
        );
        INSERT INTO clusters_new (cluster_key, cluster_id, app_id, project_id, user_id,
                                  centroid, centroid_norm, member_count, first_ts, last_ts,
                                  consolidated_entry_id, consolidated_at, created_at)
            SELECT cluster_key, cluster_id, app_id, project_id, user_id, centroid,
                   centroid_norm, member_count, first_ts, last_ts, consolidated_entry_id,
                   consolidated_at, created_at
            FROM clusters ORDER BY cluster_key;
        CREATE TABLE cluster_members_new (
            app_id        TEXT NOT NULL,
            project_id    TEXT NOT NULL,
            user_id       TEXT NOT NULL,
            entry_id      TEXT NOT NULL,
            cluster_id    TEXT NOT NULL,
            cluster_key   INTEGER NOT NULL
                          REFERENCES clusters_new(cluster_key) ON DELETE CASCADE,
            ts            REAL NOT NULL,
            similarity    REAL,
            joined_at     TEXT NOT NULL,
            deprecated_by TEXT,
            text_hash     TEXT,
            PRIMARY KEY (app_id, project_id, user_id, entry_id)
        );
        INSERT INTO cluster_members_new SELECT * FROM cluster_members;
        DROP TABLE cluster_members;
        DROP TABLE clusters;
        ALTER TABLE clusters_new RENAME TO clusters;
        ALTER TABLE cluster_members_new RENAME TO cluster_members;
        CREATE INDEX cluster_members_by_cluster ON cluster_members(cluster_key, ts);
        CREATE INDEX clusters_by_id ON clusters(cluster_key >> 12, cluster_id);
        CREATE INDEX clusters_by_user_time ON clusters(app_id, project_id, user_id, last_ts);
        CREATE INDEX clusters_consolidated ON clusters(app_id, project_id, user_id)
            WHERE consolidated_entry_id IS NOT NULL;
        CREATE TRIGGER clusters_version_insert AFTER INSERT ON clusters BEGIN
            INSERT INTO cluster_versions (app_id, project_id, user_id, version)
            VALUES (NEW.app_id, NEW.project_id, NEW.user_id, 1)
            ON CONFLICT (app_id, project_id, user_id) DO UPDATE SET version = version + 1;
        END;
        CREATE TRIGGER clusters_version_update AFTER UPDATE ON clusters BEGIN
            INSERT INTO cluster_versions (app_id, project_id, user_id, version)
            VALUES (NEW.app_id, NEW.project_id, NEW.user_id, 1)
            ON CONFLICT (app_id, project_id, user_id) DO UPDATE SET version = version + 1;
        END;
        CREATE TRIGGER clusters_version_delete AFTER DELETE ON clusters BEGIN
            INSERT INTO cluster_versions (app_id, project_id, user_id, version)
            VALUES (OLD.app_id, OLD.project_id, OLD.user_id, 1)
            ON CONFLICT (app_id, project_id, user_id) DO UPDATE SET version = version + 1;
        END;
        -- every cached cluster state is stale
        UPDATE cluster_versions SET version = version + 1;
        """,
    ),
    (
        "0013_clusters_by_user",
        """
        -- Clusters of a user by the user alone (then rowid, i.e. creation order), no longer by
        -- last activity: a new cluster's entry lands at its user's end of the index, and
        -- updating a cluster's centroid and span (every join) no longer moves an index entry.
        -- Nothing ranged over last_ts; the listing by last activity sorts one user's rows.
        DROP INDEX clusters_by_user_time;
        CREATE INDEX clusters_by_user ON clusters(app_id, project_id, user_id);
        """,
    ),
    (
        "0014_cluster_version_bumps",
        """
        -- A change to a user's clusters bumps the user's version with a plain UPDATE of its
        -- row: the upsert it replaces cost about a third of each cluster row written. The
        -- clustering service creates the row (version 0) the first time it holds the write
        -- lock for a user without one, and reloads a user whose row is missing, so a change
        -- made before the row exists (by any writer) is never mistaken for "unchanged".
        DROP TRIGGER clusters_version_insert;
        DROP TRIGGER clusters_version_update;
        DROP TRIGGER clusters_version_delete;
        CREATE TRIGGER clusters_version_insert AFTER INSERT ON clusters BEGIN
            UPDATE cluster_versions SET version = version + 1
            WHERE app_id = NEW.app_id AND project_id = NEW.project_id
              AND user_id = NEW.user_id;
        END;
        CREATE TRIGGER clusters_version_update AFTER UPDATE ON clusters BEGIN
            UPDATE cluster_versions SET version = version + 1
            WHERE app_id = NEW.app_id AND project_id = NEW.project_id
              AND user_id = NEW.user_id;
        END;
        CREATE TRIGGER clusters_version_delete AFTER DELETE ON clusters BEGIN
            UPDATE cluster_versions SET version = version + 1
            WHERE app_id = OLD.app_id AND project_id = OLD.project_id
              AND user_id = OLD.user_id;
        END;
        """,
    ),
    (
        "0015_id_watermarks",
        """
        -- The highest sequence number of every id stem (<prefix>_<YYYYMMDD>_) mentioned in any
        -- log of the user the index has read: entries, sources, evidence, parent ids, archive
        -- keys. A new id is allocated past it, so an id deleted by hand from its own file is
        -- not given to a new entry while another log may still name it. Only ever raised;
        -- reindex keeps it, and a rebuild of a lost database derives it again from every id
        -- the logs still mention. Seeded here from what the index holds (ids, parent ids,
        -- sources), since unchanged files are not read again.
        CREATE TABLE id_watermark (
            app_id      TEXT NOT NULL,
            project_id  TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            stem        TEXT NOT NULL,
            seq         INTEGER NOT NULL,
            PRIMARY KEY (app_id, project_id, user_id, stem)
        );
        INSERT INTO id_watermark (app_id, project_id, user_id, stem, seq)
            SELECT app_id, project_id, user_id, substr(ref, 1, instr(ref, '_') + 9),
                   MAX(CAST(substr(ref, instr(ref, '_') + 10) AS INTEGER))
            FROM (SELECT app_id, project_id, user_id, id AS ref FROM entries
                  UNION ALL
                  SELECT app_id, project_id, user_id, parent_id FROM entries
                  WHERE parent_id IS NOT NULL
                  UNION ALL
                  SELECT e.app_id, e.project_id, e.user_id, j.value
                  FROM entries e, json_each(e.sources) j
                  WHERE json_valid(e.sources) AND json_type(e.sources) = 'array'
                    AND j.type = 'text')
            WHERE ref GLOB '[a-z]*_[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]_[0-9][0-9][0-9][0-9]*'
              AND instr(ref, '_') BETWEEN 3 AND 4
            GROUP BY 1, 2, 3, 4;
        """,
    ),
    (
        "0016_id_watermarks_from_every_log",
        """
        -- 0015 could seed the watermark only from what the index holds: an id a log names
        -- elsewhere (an insight's evidence, a deprecated_entries key, a mention in a text)
        -- and whose entry was deleted before the upgrade was missing, and the next append
        -- gave that id to a new entry, where a rebuild from the Markdown did not. Every log
        -- is read again by the next scan (its stats and hash no longer match): that raises
        -- the watermark from each log's text, as a rebuild does. Entries are not
        -- re-embedded; an unchanged one is left as it is.
        UPDATE files SET mtime_ns = -1, sha256 = '';
        """,
    ),
    (
        "0017_set_aside_rows_sent_again",
        """
        -- Until set-aside keys covered the prompts and the model, a record a belief tier, or
        -- a window reflect_insights or a task type learn_lessons, set aside (the server
        -- refused it for good) was kept in change_cursor under its text hash, exactly as a
        -- consumed one: a changed prompt or model never brought it back. The audit tells
        -- them apart: a set-aside row was written by a run whose derivation_report row for
        -- that owner is 'failed' with an error naming it set aside in the old words ("...
        -- (sent again once edited)"; learn_lessons: "... tasks are sent again once
        -- edited)"), and a failed run moves the cursor by nothing else. Those rows are
        -- dropped, so each such record is sent once more, as after a change of the prompts
        -- or the model (refused again, it is set aside under the new key). Rows without a
        -- run id (a crash recovery's) or without that audit row are left consumed.
        DELETE FROM change_cursor
        WHERE strategy IN ('update_worldview', 'detect_contradictions', 'reconcile',
                           'reflect_insights', 'learn_lessons')
          AND run_id IS NOT NULL
          AND EXISTS (
              SELECT 1 FROM derivation_report d
              WHERE d.run_id = change_cursor.run_id AND d.strategy = change_cursor.strategy
                AND d.app_id = change_cursor.app_id
                AND d.project_id = change_cursor.project_id
                AND d.owner_id = change_cursor.user_id
                AND d.status = 'failed'
                AND (d.error LIKE '%; set aside: %(sent again once edited)'
                     OR d.error LIKE '%; set aside: %tasks are sent again once edited)'));
        """,
    ),
    (
        "0018_archive_marks_naming_no_entry",
        """
        -- A deprecated_entries key naming no entry of its own log (a typo: the entry meant
        -- stays live) is now recorded among the file's problems when the log is indexed, so
        -- `status` lists it as `lint` does. Every log is read again by the next scan to
        -- record it for logs indexed before; nothing is re-embedded, as in 0016.
        UPDATE files SET mtime_ns = -1, sha256 = '';
        """,
    ),
    (
        "0019_frontmatter_typos_read",
        """
        -- An unknown `type` or unreadable `date` in a log's frontmatter was fatal even where
        -- the file name says it: the log's entries were left out. It is a warning now; the
        -- logs an index recorded so are read again by the next scan.
        UPDATE files SET mtime_ns = -1, sha256 = ''
        WHERE problems LIKE '%unknown file type%' OR problems LIKE '%unreadable date%';
        """,
    ),
    (
        "0020_publish_notes",
        """
        -- A synced file's change not yet handed to every change subscriber (provenance,
        -- clustering): written in the transaction that marks the file synced, deleted once
        -- the subscribers ran. A process killed in between left the file synced and its
        -- change told to nobody, for good (no later scan sees the file as changed); the next
        -- sync now hands it over from here. Coordination state: reindex keeps it.
        CREATE TABLE IF NOT EXISTS publish_note (
            note_id     INTEGER PRIMARY KEY,
            path        TEXT NOT NULL,
            app_id      TEXT NOT NULL,
            project_id  TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            kind        TEXT NOT NULL,
            upserted    TEXT NOT NULL,   -- JSON list of entry ids
            archived    TEXT NOT NULL,   -- JSON {entry id: the id replacing it, or null}
            deleted     TEXT NOT NULL,   -- JSON list of entry ids
            skip        TEXT NOT NULL,   -- JSON list of the subscribers not to tell
            created_at  TEXT NOT NULL
        );
        """,
    ),
    (
        "0021_index_meta",
        """
        -- Facts about how the index was built, by key: `parser_version`, the version of
        -- the Markdown parser its rows were read with (markdown/parser.py PARSER_VERSION).
        -- An index without one was read by a parser older than the first version recorded:
        -- the next scan reads every log again, as after any change of version.
        CREATE TABLE IF NOT EXISTS index_meta (
            key    TEXT PRIMARY KEY,
            value  TEXT NOT NULL
        );
        """,
    ),
    (
        "0022_files_read_times",
        """
        -- When a log was read (epoch ns of this machine's clock), so a scan knows when its
        -- (mtime, size) can be trusted without hashing it again. `read_ns`: the start of the
        -- last read; `still_since_ns`: the end of the first read that found the log's
        -- recorded stats and bytes. A log stamped ahead of this clock (a network share's
        -- clock, `touch -d tomorrow`) was hashed again by every scan, for good; it is
        -- trusted once two reads a racy window apart found it as it was. 0: not known (rows
        -- from before this migration fall back to `synced_at`).
        ALTER TABLE files ADD COLUMN read_ns INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE files ADD COLUMN still_since_ns INTEGER NOT NULL DEFAULT 0;
        """,
    ),
    (
        "0023_runs_reason",
        """
        -- Why a run that went fine had nothing to do ("no new Episodes to merge: …"), as its
        -- trigger answered: kept in memory only, `runs` and the API showed a bare "ok" for
        -- it after a restart. NULL: a run that did something, failed, or is older.
        ALTER TABLE runs ADD COLUMN reason TEXT;
        """,
    ),
    (
        "0024_publish_notes_recheck",
        """
        -- 1: the change's file lost a problem that kept entries out of the index (it reads
        -- again, or is gone), so the owner's derived records are to be checked whole. A
        -- process killed before the subscribers ran left the file synced without its
        -- problem, and no later sync knew to check them: a record citing an entry deleted
        -- while its log could not be read stayed active.
        ALTER TABLE publish_note ADD COLUMN recheck INTEGER NOT NULL DEFAULT 0;
        """,
    ),
    (
        "0025_entries_by_successor",
        """
        -- The entries archived toward given ids (a narrative's sources, a chain of updates),
        -- asked by the clustering service each time a narrative is attached or an entry
        -- archived, to list them as history where a rebuild lists them. Partial: live
        -- entries, most of them, are not in it.
        CREATE INDEX IF NOT EXISTS entries_by_successor
            ON entries(app_id, project_id, user_id, deprecated_by)
            WHERE deprecated_by IS NOT NULL;
        """,
    ),
    (
        "0026_files_ctime",
        """
        -- The log's st_ctime_ns when it was last read: a scan compares it too, so a `chmod`
        -- (which moves no mtime nor size) is seen, and a log made unreadable (or readable
        -- again) is synced without waiting for an edit. NULL (rows from before): not compared.
        ALTER TABLE files ADD COLUMN ctime_ns INTEGER;
        """,
    ),
    (
        "0027_narratives_by_parent",
        """
        -- The live narratives, of any user, naming a cluster id the clustering service just
        -- freed (a cluster deleted or renamed): one that found its id held by another user
        -- (its log moved by hand into another user's folder) is attached then, as a rebuild
        -- attaches it. Partial: only narratives are in it.
        CREATE INDEX IF NOT EXISTS entries_narratives_by_parent
            ON entries(parent_id) WHERE parent_type = 'cluster';
        """,
    ),
    (
        "0028_derivation_report_by_owner",
        """
        -- The derivation_report rows of one user: asked when a user's folder is gone
        -- (renamed or moved by hand), so the rows follow the user whose logs hold what they
        -- derived, and for the users the rows name, each time derived records are indexed.
        CREATE INDEX IF NOT EXISTS derivation_report_by_owner
            ON derivation_report(app_id, project_id, owner_id);
        """,
    ),
    (
        "0029_change_cursor_by_user",
        """
        -- One user's change cursor, by entry id: asked when a user's folder is gone
        -- (renamed or moved by hand), so what it consumed follows the user whose logs now
        -- hold those entries (cursors.follow_moved).
        CREATE INDEX IF NOT EXISTS change_cursor_by_user
            ON change_cursor(app_id, project_id, user_id, entry_id);
        """,
    ),
    (
        "0030_publish_notes_unparented",
        """
        -- JSON list of the change's upserted ids the index held as narratives (`parent_type:
        -- cluster`) and that are narratives no longer (events.ChangeSet.unparented). A change
        -- handed over again after a kill read the member rows instead, and a deletion applied
        -- first in the same change gave a former narrative a similarity: it stayed in the
        -- cluster its `parent_id` had named, unlike a reindex. NULL: not known (notes from
        -- before), read from the rows as before.
        ALTER TABLE publish_note ADD COLUMN unparented TEXT;
        """,
    ),
]

#: ``index_meta`` key of the parser version the index's rows were read with.
PARSER_VERSION_KEY = "parser_version"

#: ids bound in one statement: some SQLite builds take at most 999 parameters, and a statement
#: binds a few besides its id list
IDS_PER_STATEMENT = 500

_T = TypeVar("_T")


def id_batches(ids: Sequence[_T]) -> Iterator[tuple[Sequence[_T], str]]:
    """``ids`` in slices of at most :data:`IDS_PER_STATEMENT`, each with its ``?,?,...`` for an
    ``IN (...)``. Every statement that asks about a list of ids runs once per slice: one
    parameter per id failed with "too many SQL variables" past the build's limit (a large
    cluster, a narrative whose hand-written ``sources`` list is long)."""
    for start in range(0, len(ids), IDS_PER_STATEMENT):
        chunk = ids[start:start + IDS_PER_STATEMENT]
        yield chunk, ",".join("?" * len(chunk))


def cluster_key_of_id(param: str = "?") -> str:
    """SQL for the ``clusters.cluster_key`` of the cluster whose id is ``param`` (NULL if
    none), through ``clusters_by_id``: one probe per bucket of 4096 keys (migration 0012).

    Every look-up of a cluster by its public id goes through this (``WHERE cluster_key =
    ...``): a bare ``WHERE cluster_id = ?`` would scan the whole index. ``param`` is the
    placeholder to use (``?5`` inside a statement with numbered ones)."""
    return ("(SELECT k.cluster_key FROM clusters k WHERE (k.cluster_key >> 12) IN ("
            "WITH RECURSIVE bucket(b) AS (SELECT MIN(cluster_key) >> 12 FROM clusters "
            "UNION ALL SELECT b + 1 FROM bucket "
            "WHERE b < (SELECT MAX(cluster_key) >> 12 FROM clusters)) "
            f"SELECT b FROM bucket) AND k.cluster_id = {param})")


#: the common form, for a statement with plain ``?`` placeholders
CLUSTER_KEY_OF_ID = cluster_key_of_id()


def utcnow_iso() -> str:
    """Sortable UTC timestamp with microseconds, as stored in every ``*_at`` column."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def readonly_uri(path: Path, *, immutable: bool = False) -> str:
    """The SQLite URI that opens ``path`` read-only. Percent-encoded: in ``file:{path}`` a
    ``#`` or ``?`` in a folder name ends the path and a ``%`` starts an escape, so a root
    such as ``~/notes#2`` opened no database (or another one), and ``add`` then reused an id
    the index had seen, ``status`` lost its index section and an interrupted merge was not
    noticed. ``immutable``: see :func:`_frozen`."""
    return f"{Path(path).absolute().as_uri()}?mode=ro{'&immutable=1' if immutable else ''}"


def connect_to_read(path: Path, *, timeout: float = 30.0) -> sqlite3.Connection:
    """A connection that reads ``path`` and refuses to write it, and leaves no ``-wal`` or
    ``-shm`` file behind. A ``mode=ro`` connection to a WAL database makes both files and,
    not allowed to write, never takes them away: ``lint``, ``status`` and every check for an
    interrupted merge left them in a root they only read. So where this process may write
    the folder, the connection is read-write with ``query_only`` on, and, closing last, takes
    them away as a writer does; elsewhere it is ``mode=ro``, which cannot make them there."""
    if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK):
        uri = f"{Path(path).absolute().as_uri()}?mode=rw"
        conn = sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)
        conn.execute("PRAGMA query_only = 1")
        return conn
    return sqlite3.connect(readonly_uri(path), uri=True, timeout=timeout,
                           check_same_thread=False)


def _frozen(path: Path) -> bool:
    """Whether ``path`` can only be read as it stands: its folder cannot be written (a
    read-only mount, another user's root) and no write-ahead log holds pages beyond it.

    A WAL database is read through its ``-shm`` index, which a reader creates when it is
    missing (after the last writer closed cleanly); where it cannot, SQLite refuses even a
    read-only open ("unable to open database file") unless told the file will not change
    (``immutable=1``). That promise is only made with no ``-wal`` content, which an
    immutable open would ignore; a writer that starts later (the owner of the files) is
    not seen by a connection opened before."""
    wal = path.with_name(path.name + "-wal")
    try:
        pending = wal.stat().st_size > 0
    except OSError:
        pending = False
    return not pending and not os.access(path.parent, os.W_OK)


def db_path(root: Path) -> Path:
    return Path(root) / ".index" / "sqlite" / "system.db"


def db_built(root: Path) -> bool:
    """Whether ``system.db`` holds an index: it exists and is not empty. An empty file is what
    ``sqlite3 <root>/.index/sqlite/system.db "SELECT ..."`` (SPEC §6) leaves on a root with no
    index; a reader that opened it with :func:`connect` created the index's tables in it, and
    ``status`` then took those empty tables for the root's counts ("0 / 0").

    Only a ``system.db`` that is not there means no index. One that cannot be looked at (a
    file where ``.index/sqlite`` goes, a folder without permission, a symlink loop) counts as
    built, so the reader that opens it fails naming it: ``reports`` said "No Reflection
    reports yet" and ``status`` "index: not built yet", exit 0, over a root whose audit was
    there but out of reach."""
    try:
        return db_path(root).stat().st_size > 0
    except FileNotFoundError:
        return False
    except OSError:
        return True


def connect(root: Path | str, *, readonly: bool = False) -> sqlite3.Connection:
    """Open ``system.db`` (creating and migrating it unless ``readonly``).

    WAL mode lets the API read while a Reflection run writes; the busy timeout makes writers
    from several processes queue instead of failing.
    """
    path = db_path(Path(root))
    try:
        if readonly:
            conn = connect_to_read(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
    except (sqlite3.OperationalError, OSError) as exc:
        raise IndexUnavailable(path, _why_unopened(path, exc)) from None
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA foreign_keys = ON")
        if not readonly:
            _enable_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            migrate(conn)
        else:
            try:
                conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            except sqlite3.OperationalError:
                if not _frozen(path):
                    raise
                conn.close()
                conn = sqlite3.connect(readonly_uri(path, immutable=True), uri=True,
                                       timeout=30.0, check_same_thread=False)
                conn.row_factory = sqlite3.Row
                conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        conn.close()
        if isinstance(exc, sqlite3.OperationalError) and not _contended(exc):
            raise IndexUnavailable(path, exc) from None
        # Only the base class means "not a database" / "malformed"; a locked or busy database
        # keeps its own handling (callers wait or retry).
        if type(exc) is not sqlite3.DatabaseError:
            raise
        raise IndexUnreadable(path, exc) from None
    return conn


def _why_unopened(path: Path, exc: Exception) -> str:
    """Why ``system.db`` could not be opened: a file where one of its folders goes is named
    (SQLite says only "unable to open database file"; ``mkdir`` "[Errno 17] File exists")."""
    blocker = not_a_folder(path.parent)
    if blocker is not None:
        return f"{shown_path(blocker)} is not a folder"
    if path.is_dir():
        return f"{shown_path(path)} is a folder, not a database file"
    return error_text(exc)


def _contended(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` is another connection holding the database (worth waiting for), not a
    database that cannot be opened or written at all."""
    return "locked" in str(exc) or "busy" in str(exc)


def _enable_wal(conn: sqlite3.Connection, deadline_s: float = 30.0) -> None:
    """Switch the database to WAL, waiting out other connections doing the same.

    Changing the journal mode takes an exclusive lock and SQLite does not run the busy handler
    for it: when several threads or processes open a brand-new ``system.db`` at once (a watcher
    and a reader, two CLI commands), all but one get "database is locked" straight away. The
    mode is persistent, so once any of them has switched it the others only need to see it.
    """
    give_up = time.monotonic() + deadline_s
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            if not _contended(exc):
                raise
            if time.monotonic() >= give_up:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def migrate(conn: sqlite3.Connection, migrations: list[tuple[str, str]] | None = None) -> list[str]:
    """Apply every migration not yet recorded; returns the names applied now."""
    migrations = MIGRATIONS if migrations is None else migrations
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    applied = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
    done: list[str] = []
    for name, sql in migrations:
        if name in applied:
            continue
        with transaction(conn):
            # Another connection (thread or process) may have applied it since we looked;
            # BEGIN IMMEDIATE holds the write lock, so this second look is authoritative.
            if conn.execute(
                "SELECT 1 FROM schema_migrations WHERE name = ?", (name,)
            ).fetchone():
                continue
            # executescript would COMMIT on its own; run statements one by one instead.
            for statement in _split_sql(sql):
                if not _column_there(conn, statement):
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)",
                (name, utcnow_iso()),
            )
        done.append(name)
    return done


class transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` / ``ROLLBACK``: one writer at a time, across processes.

    Whatever happens, the connection leaves the block outside any transaction: a ``COMMIT``
    that fails (disk full, a deferred constraint, an I/O error) is rolled back before its error
    is raised. Left open, every later ``BEGIN`` on that long-lived connection failed ("cannot
    start a transaction within a transaction") until a restart, and the half-done writes could
    have been committed by whichever block came next. An error after which SQLite already
    rolled the transaction back itself (``SQLITE_FULL`` may) is raised as it is, not masked by
    a ``ROLLBACK`` failing for want of a transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            try:
                self.conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
        else:
            self._rollback()

    def _rollback(self) -> None:
        """Roll back if a transaction is still open; a failing rollback is logged, never raised
        over the error that led here."""
        if not self.conn.in_transaction:
            return
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            _log.error("ROLLBACK failed: %s", exc)


_ADD_COLUMN = re.compile(r"ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)", re.IGNORECASE)


def _column_there(conn: sqlite3.Connection, statement: str) -> bool:
    """Whether ``statement`` adds a column its table has already: SQLite has no ``ADD COLUMN
    IF NOT EXISTS``, and a migration recorded as not applied (a database a newer release
    wrote, taken back by hand) must run again as the ``IF NOT EXISTS`` ones do."""
    match = _ADD_COLUMN.match(statement.strip())
    if match is None:
        return False
    table, column = match.groups()
    return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))


def _split_sql(sql: str) -> list[str]:
    """Statements of a migration script; a ``CREATE TRIGGER … BEGIN …; END;`` stays whole
    (pieces are joined until SQLite says the statement is complete)."""
    lines = [line.split("--", 1)[0] for line in sql.splitlines()]
    out: list[str] = []
    pending = ""
    for piece in "\n".join(lines).split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                out.append(pending.strip().removesuffix(";").strip())
            pending = ""
    if pending.strip(" \n;"):
        out.append(pending.strip().removesuffix(";").strip())
    return out
