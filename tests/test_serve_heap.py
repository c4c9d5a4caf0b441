"""``serve``'s threads share two glibc heaps ("arenas") instead of getting one each.

glibc gives every thread that allocates its own arena, up to 8 per core; a daemon has dozens
of threads (LanceDB's, uvicorn's, the search pool's) and every arena keeps its own free space
resident: ~6 MB of ``serve``'s RSS after 300 searches (issue 15, docs/memory.md). This runs
``serve`` (its HTTP loop replaced by an immediate return) in a fresh interpreter, then lets 8
threads allocate at once and counts the arenas glibc reports (``malloc_info``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import ctypes, ctypes.util, os, sys, threading
    from pathlib import Path

    import everos_reflect.serve as serving
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings

    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]

    def arenas():
        path = os.path.join(sys.argv[3], "malloc_info.xml")  # the test's own tmp folder
        out = libc.fopen(path.encode(), b"w")
        libc.malloc_info(0, out)
        libc.fclose(out)
        return Path(path).read_text().count("<heap nr=")

    serving._Server.run = lambda self, *args, **kwargs: None  # start up, then stop at once
    runtime = Runtime(Path(sys.argv[1]), Settings(), embedder=HashEmbedder())
    if sys.argv[2] == "serve":
        serving.serve(runtime, port=0)
    before = arenas()
    barrier = threading.Barrier(8)

    def work():
        blocks = [libc.malloc(4096) for _ in range(64)]
        barrier.wait()  # all 8 threads hold memory at the same time
        for block in blocks:
            libc.free(block)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    runtime.close()
    print(before, arenas())
""")


def arenas_after(root: Path, mode: str) -> tuple[int, int]:
    """How many glibc arenas a fresh interpreter has after ``serve``'s start-up
    (``mode="serve"``; ``"plain"`` skips it), and after 8 more threads allocated together."""
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(root), mode, str(root.parent)],
                          env={**os.environ, "EVEROS_ROOT": str(root)}, capture_output=True,
                          text=True, timeout=300, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    before, after = done.stdout.strip().splitlines()[-1].split()
    return int(before), int(after)


def test_serve_makes_threads_share_the_malloc_arenas(root: Path) -> None:
    # arenas made before the cap (the main thread's, LanceDB's event loop's ...) stay; the new
    # threads get no arena of their own
    before, after = arenas_after(root, "serve")
    assert after <= max(before, 2)


def test_without_serve_each_thread_gets_its_own_arena(root: Path) -> None:
    # the check can fail: the same 8 threads, without serve's cap, make new arenas
    before, after = arenas_after(root, "plain")
    assert after >= before + 4
