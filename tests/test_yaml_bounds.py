"""Bounded YAML: alias bombs, deep nesting and oversized blocks are refused, never expanded.

The 791-byte bomb below (aliases nested ten deep) once made `reindex` and `search` grow to
17 GB: the content hash stringified its 10^10 expanded values. Now the entry is reported with
its file and line and skipped like any unparseable entry; its neighbours are indexed.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli import index_cmds
from everos_reflect.cli.common import existing_root
from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.markdown.parser import (
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    load_yaml,
    parse_log,
)
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

ANDREW = UserRef.of("u_andrew")
DAY = date(2026, 10, 12)
HEAD = "---\ntype: episode_daily\nschema_version: 1\nuser_id: u_andrew\ndate: '2026-10-12'\n---\n"
PATH = "u/episodes/episode-2026-10-12.md"


def alias_bomb() -> str:
    """Ten levels of ten-fold aliases: under 800 bytes of YAML, 10^10 values once expanded
    (the issue's bomb was 791 bytes with the entry around it)."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


def entry(n: int, extra_meta: str = "", content: str = "c") -> str:
    eid = f"ep_20261012_{n:04d}"
    meta = "owner_id: u_andrew\ntimestamp: 2026-10-11T02:00:00+00:00\nparent_type: memcell\n"
    return (f"<!-- entry:{eid} -->\n---\n{meta}{extra_meta}---\n## Subject\ns{n}\n\n"
            f"## Content\n{content}\n<!-- /entry:{eid} -->\n")


def test_the_alias_bomb_is_small_and_ten_deep() -> None:
    bomb = alias_bomb()
    assert len(bomb.encode()) < 800
    assert bomb.count("&a") == 10 and bomb.count("*a") == 90


def test_alias_bomb_in_entry_metadata_is_an_error_and_the_entry_is_skipped() -> None:
    text = HEAD + entry(1) + entry(2, alias_bomb()) + entry(3)
    log = parse_log(text, PATH)
    assert [e.id for e in log.entries] == ["ep_20261012_0001", "ep_20261012_0003"]
    (problem,) = log.diagnostics
    assert problem.severity == "error"
    assert "aliases" in problem.message and "ep_20261012_0002" in problem.message
    bomb_line = text.splitlines().index(alias_bomb().splitlines()[0]) + 1
    assert bomb_line <= problem.line <= bomb_line + 10


def test_a_single_alias_is_refused_too() -> None:
    log = parse_log(HEAD + entry(1, "tags: &t [a, b]\nmore: *t\n"), PATH)
    assert log.entries == []
    assert "aliases (*name) are not accepted" in log.diagnostics[0].message


def test_an_anchor_without_alias_is_harmless() -> None:
    (e,) = parse_log(HEAD + entry(1, "tags: &t [a, b]\n"), PATH).entries
    assert e.meta["tags"] == ["a", "b"]


def test_a_recursive_alias_is_refused() -> None:
    log = parse_log(HEAD + entry(1, "loop: &l [*l]\n"), PATH)
    assert log.entries == [] and "aliases" in log.diagnostics[0].message


def test_nesting_up_to_the_bound_is_read_and_one_deeper_is_refused() -> None:
    inner = MAX_YAML_DEPTH - 1  # the metadata mapping itself is the first level
    ok = "deep: " + "[" * inner + "]" * inner + "\n"
    deep = "deep: " + "[" * (inner + 1) + "]" * (inner + 1) + "\n"
    log = parse_log(HEAD + entry(1, ok) + entry(2, deep), PATH)
    assert [e.id for e in log.entries] == ["ep_20261012_0001"]
    assert f"nested deeper than {MAX_YAML_DEPTH} levels" in log.diagnostics[0].message


def test_block_nesting_thousands_deep_is_refused_without_recursion_errors() -> None:
    deep = "deep:\n" + "".join(" " * (i + 1) + "-\n" for i in range(5000))
    log = parse_log(HEAD + entry(1, deep) + entry(2), PATH)
    assert [e.id for e in log.entries] == ["ep_20261012_0002"]
    assert log.diagnostics[0].severity == "error"


def test_an_oversized_metadata_block_is_refused_unread() -> None:
    big = "blob: " + "x" * MAX_YAML_BYTES["metadata"] + "\n"
    log = parse_log(HEAD + entry(1, big) + entry(2), PATH)
    assert [e.id for e in log.entries] == ["ep_20261012_0002"]
    assert "YAML block is over 64 KiB" in log.diagnostics[0].message


def test_multibyte_text_counts_in_utf8_bytes() -> None:
    limit = MAX_YAML_BYTES["metadata"]
    _, problem = load_yaml("k: " + "é" * (limit // 2), 1)
    assert problem is not None and "over 64 KiB" in problem[1]
    value, problem = load_yaml("k: " + "é" * (limit // 2 - 10), 1)
    assert problem is None and len(value["k"]) == limit // 2 - 10


def test_alias_in_the_file_frontmatter_is_fatal_and_the_file_left_alone() -> None:
    head = HEAD.replace("user_id: u_andrew\n", "user_id: &u u_andrew\nowner: *u\n")
    log = parse_log(head + entry(1), PATH)
    assert not log.ok and log.entries == []
    assert any(d.severity == "fatal" and "aliases" in d.message for d in log.diagnostics)


# --- the commands stay bounded on a root holding the bomb -------------------------------------


@pytest.fixture
def bombed(root: Path) -> Path:
    """A root with two good episodes around the bomb, and a deeply nested entry elsewhere."""
    (root / "everos.toml").write_text("")
    rt = Runtime(root, Settings(), embedder=HashEmbedder(32))
    meta = {"timestamp": "2026-10-12T10:00:00+00:00", "parent_type": "memcell"}
    rt.store.append(ANDREW, Kind.EPISODE, meta, {"Subject": "Dogs", "Content": "Toby the dog."},
                    day=DAY)
    path = rt.store.log_path(ANDREW, Kind.EPISODE, DAY)
    with path.open("a") as fh:
        fh.write(entry(2, alias_bomb()))
        fh.write(entry(3, "x: " + "[" * 900 + "]" * 900 + "\n"))
    rt.store.append(ANDREW, Kind.EPISODE, meta, {"Subject": "Cats", "Content": "A cat, Tom."},
                    day=DAY)
    rt.close()
    return root


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_open(root: str | None) -> Runtime:
        return Runtime(existing_root(root), Settings(), embedder=HashEmbedder(32))

    monkeypatch.setattr(index_cmds, "open_runtime", fake_open)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_reindex_skips_the_bomb_and_indexes_its_neighbours(bombed: Path) -> None:
    result = run("reindex", "--root", str(bombed), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["entries_upserted"] == 2
    (problems,) = data["problems"].values()
    assert any("ep_20261012_0002" in p and "aliases" in p for p in problems)
    assert any("ep_20261012_0003" in p and "nested deeper" in p for p in problems)


def test_search_finds_the_neighbours_of_the_bomb(bombed: Path) -> None:
    result = run("search", "Toby the dog", "--root", str(bombed), "--json", "--mode", "keyword")
    assert result.exit_code == 0, result.output
    ids = [h["id"] for h in json.loads(result.stdout)["episodes"]]
    assert ids[0] == "ep_20261012_0001"
    assert "ep_20261012_0002" not in ids


def test_lint_reports_the_bomb_and_the_deep_entry_with_file_and_line(bombed: Path) -> None:
    result = run("lint", "--root", str(bombed), "--json")
    assert result.exit_code == 1
    problems = json.loads(result.stdout)["problems"]
    rel = "default_app/default_project/users/u_andrew/episodes/episode-2026-10-12.md"
    found = {(p["file"], p["severity"]) for p in problems if "YAML refused" in p["message"]}
    assert found == {(rel, "error")}
    assert all(p["line"] > 0 for p in problems)


# --- integers too long to print: Python's str() refuses over 4,300 digits --------------------

LONG_INTS = {
    "hex": "0x" + "f" * 4000,
    "binary": "0b" + "1" * 15000,
    "octal": "0" + "7" * 5000,
    "base 60": ":".join(["59"] * 3000),
    "decimal": "9" * 5000,
}


@pytest.mark.parametrize("where", ["value", "key"])
@pytest.mark.parametrize("name", list(LONG_INTS))
def test_an_integer_too_long_to_print_is_refused_with_its_line(name: str, where: str) -> None:
    """4 KB of hex is an int of ~4,800 decimal digits: it parsed, and then every content
    hash of it (``str()``) raised, so `reindex`, `search` and the watcher stopped there."""
    number = LONG_INTS[name]
    # as a key (``? key`` form: YAML caps an implicit key at 1,024 characters) it made the
    # whole file an "internal parser error"
    extra = f"x: {number}\n" if where == "value" else f"? {number}\n: 1\n"
    text = HEAD + entry(1) + entry(2, extra) + entry(3)
    log = parse_log(text, PATH)
    assert [e.id for e in log.entries] == ["ep_20261012_0001", "ep_20261012_0003"]
    (problem,) = log.diagnostics
    line = text.splitlines().index(extra.splitlines()[0]) + 1
    assert (problem.severity, problem.line) == ("error", line)
    assert problem.message == (f"entry ep_20261012_0002: YAML refused: a number of "
                               f"{len(number):,} characters (at most 1,000)")
    assert all(e.content_hash for e in log.entries)


def test_an_integer_of_1000_characters_is_read() -> None:
    (e,) = parse_log(HEAD + entry(1, "x: " + "9" * 1000 + "\n"), PATH).entries
    assert e.meta["x"] == 10**1000 - 1 and e.content_hash
    (e,) = parse_log(HEAD + entry(1, "x: 0x" + "f" * 998 + "\n"), PATH).entries
    assert e.meta["x"] == "0x" + "f" * 998 and e.content_hash  # hex is no number: kept as text


def test_reindex_skips_an_entry_with_an_unprintable_integer(root: Path) -> None:
    rt = Runtime(root, Settings(), embedder=HashEmbedder(32))
    meta = {"timestamp": "2026-10-12T10:00:00+00:00", "parent_type": "memcell"}
    rt.store.append(ANDREW, Kind.EPISODE, meta, {"Subject": "Dogs", "Content": "Toby."},
                    day=DAY)
    with rt.store.log_path(ANDREW, Kind.EPISODE, DAY).open("a") as fh:
        fh.write(entry(2, "x: " + LONG_INTS["hex"] + "\n"))
    rt.close()
    result = run("reindex", "--root", str(root), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["entries_upserted"] == 1
    (problems,) = data["problems"].values()
    assert any("ep_20261012_0002" in p and "a number of 4,002 characters" in p for p in problems)


# --- a key written twice: YAML forbids it, PyYAML kept the last one without a word -------------


@pytest.mark.parametrize("meta", [
    "owner_id: u_andrew\ntimestamp: 2026-10-11T02:00:00+00:00\nowner_id: mallory\n",
    "owner_id: u_andrew\ntimestamp: 2026-10-11T02:00:00+00:00\nx: {a: 1, a: 2}\n",
])
def test_a_key_written_twice_in_entry_metadata_is_an_error(meta: str) -> None:
    text = HEAD + entry(1) + entry(2).replace(
        "owner_id: u_andrew\ntimestamp: 2026-10-11T02:00:00+00:00\n", meta) + entry(3)
    log = parse_log(text, PATH)
    assert [e.id for e in log.entries] == ["ep_20261012_0001", "ep_20261012_0003"]
    (problem,) = log.diagnostics
    assert problem.severity == "error"
    assert problem.line == text.splitlines().index(meta.splitlines()[-1]) + 1
    assert "is written twice in one mapping; keep one" in problem.message


def test_deprecated_entries_written_twice_is_fatal_and_never_patched() -> None:
    """The second block hid the first: ep_0001, archived in it, was read as live, and the
    writer (which patched the first block) failed with "could not patch ... side effects"."""
    from everos_reflect.errors import MarkdownError
    from everos_reflect.markdown import writer

    head = HEAD[:-4] + ("deprecated_entries:\n  ep_20261012_0001: ep_20261012_0003\n"
                        "deprecated_entries:\n  ep_20261012_0002: ep_20261012_0003\n---\n")
    log = parse_log(head + entry(1) + entry(2) + entry(3), PATH)
    assert not log.ok and log.entries == []
    (problem,) = log.diagnostics
    assert (problem.line, problem.severity) == (8, "fatal")
    assert problem.message == ("file frontmatter: YAML refused: key 'deprecated_entries' is "
                               "written twice in one mapping; keep one")
    with pytest.raises(MarkdownError, match="written twice"):
        writer.add_deprecations(head, {"ep_20261012_0003": "ep_20261012_0001"})
