"""The command line makes pyarrow allocate from the system heap unless the user chose a pool.

pyarrow's default pool is an allocator it bundles, with heaps of its own beside glibc's; in
``serve`` it kept ~4 MB more resident (issue 15, docs/memory.md). The choice has to be made
before Arrow first uses its default pool, so it is made when the CLI package is imported:
each case runs in a fresh interpreter that imports the CLI, then asks pyarrow for its pool.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = (
    "import everos_reflect.cli.main, pyarrow as pa, pyarrow.compute as pc\n"
    "pc.sum(pa.array(range(1000)))  # something allocated from the default pool\n"
    "print(pa.default_memory_pool().backend_name)\n"
)


def pool_backend(**env: str) -> str:
    """The backend of pyarrow's default pool in a fresh interpreter that imported the CLI, with
    ``env`` set (``ARROW_DEFAULT_MEMORY_POOL`` removed first unless given)."""
    base = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env={**base, **env},
                          capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_cli_process_uses_the_system_pool() -> None:
    assert pool_backend() == "system"


def test_a_pool_the_user_chose_stands() -> None:
    assert pool_backend(ARROW_DEFAULT_MEMORY_POOL="jemalloc") == "jemalloc"
