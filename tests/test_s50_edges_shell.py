"""A command printed for the user to paste names its root so a shell reads back that very
folder, even when the name holds a byte that is not UTF-8, a line break or a tab.

``init`` printed ``enable reflect_episodes --root '/tmp/x\\xffy'``: inside ``'…'`` a shell
takes ``\\xff`` for four characters, so the command named a folder that does not exist."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from everos_reflect.model import shell_path, shell_word

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash runs the printed command")


def _cli(*args: bytes | str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "everos_reflect.cli.main", *args],
                          capture_output=True, cwd=cwd, timeout=120,
                          env={**os.environ, "PYTHONIOENCODING": "utf-8"})


def _read_back(word: str) -> bytes:
    assert BASH is not None
    return subprocess.run([BASH, "-c", f"printf %s {word}"], capture_output=True,
                          check=True).stdout


@needs_bash
@pytest.mark.parametrize("name", [b"x\xffy z", b"line\nbreak", b"tab\there", b"q'uote\\b",
                                  "caf\u00e9 \u202e".encode(), b"plain", b"a b"])
def test_shell_word_reads_back_as_the_same_bytes(name: bytes) -> None:
    path = os.fsdecode(b"/tmp/" + name)
    assert _read_back(shell_word(path)) == b"/tmp/" + name
    assert _read_back(shell_path(path)) == b"/tmp/" + name


def test_a_plain_path_is_quoted_as_before() -> None:
    assert shell_word("/tmp/my notes") == "'/tmp/my notes'"
    assert shell_word("/tmp/café") == "'/tmp/café'"
    assert shell_word(os.fsdecode(b"/tmp/x\xffy")) == "$'/tmp/x\\xffy'"


@needs_bash
def test_inits_enable_command_runs_as_printed(tmp_path: Path) -> None:
    root = os.fsencode(tmp_path) + b"/r\xffoot\tx"
    done = _cli("init", root, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode("utf-8")
    command = re.search(r"\(enable with: (everos-reflect enable .*)\)$", out, re.M)
    assert command is not None, out
    assert BASH is not None
    ran = subprocess.run([BASH, "-c", command.group(1).replace(
        "everos-reflect", f"{sys.executable} -m everos_reflect.cli.main", 1)],
        capture_output=True, cwd=tmp_path, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert b"enabled = true" in (Path(os.fsdecode(root)) / "ome.toml").read_bytes()


@needs_bash
def test_the_init_suggested_for_a_missing_root_runs_as_printed(tmp_path: Path) -> None:
    root = os.fsencode(tmp_path) + b"/miss\xffing"
    done = _cli("status", "--root", root, cwd=tmp_path)
    assert done.returncode != 0
    command = re.search(r"`(everos-reflect init .*)`", done.stderr.decode("utf-8"))
    assert command is not None, done.stderr
    assert BASH is not None
    ran = subprocess.run([BASH, "-c", command.group(1).replace(
        "everos-reflect", f"{sys.executable} -m everos_reflect.cli.main", 1)],
        capture_output=True, cwd=tmp_path, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert (Path(os.fsdecode(root)) / "ome.toml").is_file()
