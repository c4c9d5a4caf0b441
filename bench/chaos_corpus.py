"""The malformed-file corpus of the chaos harness: every way a hand edit, a broken sync tool or
a hostile file can spoil a daily log, next to valid logs that must still be indexed.

Categories (each file is one case; ``make_corpus(root, n)`` cycles through them until ``n``
files exist): truncated markers, duplicate ids, binary junk, invalid UTF-8, YAML alias bombs,
deep nesting, a BOM, CRLF line ends, huge lines, huge files, symlinks out of the root, and files
in wrong places (unknown folders, bad names, the wrong kind's folder).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

APP, PROJECT = "chaos_app", "chaos_proj"


def _header(kind: str, user: str, day: date) -> str:
    return (f"---\ntype: {kind}_daily\nschema_version: 1\nuser_id: {user}\n"
            f"date: '{day.isoformat()}'\n---\n")


def _entry(prefix: str, day: date, seq: int, user: str, text: str, extra: str = "") -> str:
    eid = f"{prefix}_{day:%Y%m%d}_{seq:04d}"
    return (f"<!-- entry:{eid} -->\n---\nowner_id: {user}\ntimestamp: {day.isoformat()}T10:00:00"
            f"+00:00\nparent_type: memcell\nparent_id: mc_{seq}\n{extra}---\n## Subject\n"
            f"{text[:40]}\n\n## Content\n{text}\n<!-- /entry:{eid} -->\n")


def valid_log(user: str, day: date, texts: list[str]) -> str:
    return _header("episode", user, day) + "".join(
        _entry("ep", day, i + 1, user, t) for i, t in enumerate(texts))


def _truncated(user: str, day: date, rng: random.Random) -> bytes:
    text = valid_log(user, day, ["Truncated log about gardening and tomatoes."])
    return text[: rng.randint(len(text) // 2, len(text) - 5)].encode()


def _duplicate_ids(user: str, day: date, rng: random.Random) -> bytes:
    one = _entry("ep", day, 1, user, "First block with a repeated id about cycling.")
    return (_header("episode", user, day) + one + one.replace("First", "Second")).encode()


def _binary(user: str, day: date, rng: random.Random) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(rng.randint(64, 4096)))


def _invalid_utf8(user: str, day: date, rng: random.Random) -> bytes:
    text = valid_log(user, day, ["Invalid bytes follow about the lake house."]).encode()
    cut = rng.randint(len(text) // 2, len(text) - 1)
    return text[:cut] + b"\xff\xfe\xc3\x28" + text[cut:]


def _alias_bomb(user: str, day: date, rng: random.Random) -> bytes:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    bomb = "\n".join(lines) + "\n"
    return (_header("episode", user, day)
            + _entry("ep", day, 1, user, "A bomb in the metadata about knitting.", bomb)).encode()


def _deep_nesting(user: str, day: date, rng: random.Random) -> bytes:
    depth = rng.randint(2000, 6000)
    deep = "x: " + "[" * depth + "]" * depth + "\n"
    return (_header("episode", user, day)
            + _entry("ep", day, 1, user, "Deeply nested metadata about chess.", deep)).encode()


def _bom(user: str, day: date, rng: random.Random) -> bytes:
    return b"\xef\xbb\xbf" + valid_log(user, day, ["A BOM before the frontmatter, about rowing."]
                                       ).encode()


def _crlf(user: str, day: date, rng: random.Random) -> bytes:
    return valid_log(user, day, ["Windows line ends about baking bread."]).replace(
        "\n", "\r\n").encode()


#: Size factor of the huge cases (1.0 in the full run; the CI's short run shrinks them).
SCALE = {"huge": 1.0}


def _huge_line(user: str, day: date, rng: random.Random) -> bytes:
    words = int(rng.randint(20000, 60000) * SCALE["huge"])
    line = " ".join(f"word{rng.randint(0, 99999)}" for _ in range(max(words, 1)))
    return valid_log(user, day, [line]).encode()


def _huge_file(user: str, day: date, rng: random.Random) -> bytes:
    texts = [f"Entry {i} about a long diary of hiking trips number {i}." * 20
             for i in range(max(int(rng.randint(800, 1500) * SCALE["huge"]), 2))]
    return valid_log(user, day, texts).encode()


def _frontmatter_junk(user: str, day: date, rng: random.Random) -> bytes:
    return (f"---\ntype: [unclosed\nuser_id: {user}\n---\n"
            + _entry("ep", day, 1, user, "Broken frontmatter about sailing.")).encode()


CASES: dict[str, Callable[[str, date, random.Random], bytes]] = {
    "truncated markers": _truncated,
    "duplicate ids": _duplicate_ids,
    "binary junk": _binary,
    "invalid UTF-8": _invalid_utf8,
    "YAML alias bomb": _alias_bomb,
    "deep nesting": _deep_nesting,
    "BOM": _bom,
    "CRLF": _crlf,
    "huge line": _huge_line,
    "huge file": _huge_file,
    "broken frontmatter": _frontmatter_junk,
}
#: Cases that are not one file's bytes: symlinks out of the root, files in wrong places.
PLACES = ("symlink out of the root", "wrong place")
#: Cases whose files are valid daily logs, only large: Reflection may rightly archive entries
#: in them (a frontmatter patch), so they are checked for cost, not for unchanged bytes.
VALID_CASES = frozenset({"huge line", "huge file"})


def make_corpus(root: Path, n: int, *, seed: int = 11, huge_every: int = 40,
                huge_scale: float = 1.0) -> tuple[dict[str, int], dict[Path, str], list[str]]:
    """Write ``n`` malformed files (cycling through the cases; huge files only every
    ``huge_every``-th turn to bound disk use, ``huge_scale`` times their full size) and valid
    neighbours.

    Returns (files per case, every malformed path with its case, the valid neighbours'
    contents that must be indexed).
    """
    rng = random.Random(seed)
    SCALE["huge"] = huge_scale
    counts: dict[str, int] = {}
    paths: dict[Path, str] = {}
    outside = root.parent / f"{root.name}-outside"
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.md").write_text(valid_log("u_secret", date(2026, 1, 1),
                                                 ["A secret outside the root."]))
    names = list(CASES) + list(PLACES)
    day0 = date(2026, 3, 1)
    i = 0
    while len(paths) < n:
        case = names[i % len(names)]
        user = f"u_bad{i % 23:02d}"
        day = day0 + timedelta(days=i)
        i += 1
        if case in ("huge file", "huge line") and (i // len(names)) % huge_every != 0:
            continue
        folder = root / APP / PROJECT / "users" / user / "episodes"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"episode-{day.isoformat()}.md"
        if case == "symlink out of the root":
            os.symlink(outside / "secret.md", path)
        elif case == "wrong place":
            spot = rng.choice([
                root / APP / PROJECT / "users" / user / "notes" / f"episode-{day}.md",
                root / APP / PROJECT / "users" / user / "episodes" / f"episode-{day}.txt",
                root / APP / PROJECT / "users" / user / "episodes" / f"ep-{day}.md",
                root / APP / PROJECT / "users" / user / ".atomic_facts" / f"episode-{day}.md",
                root / APP / PROJECT / f"episode-{day}.md",
                root / APP / PROJECT / "users" / "bad user!" / "episodes" / f"episode-{day}.md",
            ])
            spot.parent.mkdir(parents=True, exist_ok=True)
            spot.write_text(valid_log(user, day, ["A file in the wrong place about kites."]))
            path = spot
        else:
            path.write_bytes(CASES[case](user, day, rng))
        counts[case] = counts.get(case, 0) + 1
        paths[path] = case
    valid = []
    for j in range(6):  # valid neighbours: their users also own malformed files
        user = f"u_bad{j:02d}"
        day = date(2025, 12, 1) + timedelta(days=j)
        texts = [f"Valid neighbour {j} talks about marathon training plan week {k}."
                 for k in range(3)]
        folder = root / APP / PROJECT / "users" / user / "episodes"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"episode-{day.isoformat()}.md").write_text(valid_log(user, day, texts))
        valid += texts
    return counts, paths, valid


def fingerprint(paths: list[Path]) -> dict[str, bytes]:
    """Bytes of every malformed file (a symlink by its target path: never followed)."""
    out = {}
    for path in paths:
        out[str(path)] = (b"-> " + os.readlink(path).encode()) if path.is_symlink() \
            else path.read_bytes()
    return out
