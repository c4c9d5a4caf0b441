"""What a sync pays for letting the change cursors follow a renamed user folder
(``cursors.follow_moved``), when no folder was renamed: the common case, every sync.

A scratch index with ``--users`` users, each with ``--ids`` consumed entries for each of five
tiers (the same entry ids in every user: ids are per user, ``ep_<day>_0001`` recurs), one
indexed entry each (so no user looks gone). Then ``follow_moved`` is called as a sync that
indexed ``--batch`` entries of those ids would call it, and as an add's one-entry sync; the
mean wall time of each is printed.

    python bench/cursor_follow_cost.py [--users 200] [--ids 300] [--batch 256]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index import cursors
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime

TIERS = 5


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--ids", type=int, default=300)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "ome.toml").write_text("", encoding="utf-8")
        rt = Runtime(root, embedder=HashEmbedder(16))
        conn = rt.db()
        ids = [f"ep_2026{m:02d}{d:02d}_0001" for m in range(1, 13) for d in range(1, 29)]
        ids = (ids * (args.ids // len(ids) + 1))[:args.ids]
        conn.execute("BEGIN")
        for u in range(args.users):
            ref = UserRef.of(f"u_{u}")
            conn.execute("INSERT INTO entries (app_id, project_id, user_id, id, kind, path, "
                         "content_hash, text_hash) VALUES (?,?,?,?,?,?,?,?)",
                         (ref.app, ref.project, ref.user_id, "ep_x", "episode", "p", "h", "h"))
            for t in range(TIERS):
                cursors.advance(conn, f"tier{t}", ref, dict.fromkeys(ids, "h"), None)
        conn.execute("COMMIT")
        for label, held in (("batch", [(i, "h") for i in ids[:args.batch]]),
                            ("one entry", [(ids[0], "h")])):
            start = time.perf_counter()
            for _ in range(args.repeat):
                cursors.follow_moved(conn, held, [], lambda ref: False)
            spent = (time.perf_counter() - start) / args.repeat * 1000
            print(f"{args.users} users x {TIERS} tiers x {len(set(ids))} ids: {label} "
                  f"({len(held)} entries) {spent:.3f} ms per sync")
        rt.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
