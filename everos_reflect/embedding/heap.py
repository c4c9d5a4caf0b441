"""Keep glibc from holding on to the model's freed working memory.

A model call allocates hundreds of tensors, the attention ones ~12 MB each, and frees them all
when it returns. glibc serves a block above its *mmap threshold* with its own mapping, returned
to the kernel on ``free``; but the threshold starts at 128 KiB and rises to the size of every
larger mapped block that is freed, so after the first call the big tensors come from the heap,
which fragments: resident memory stays at the call's peak, or above it, long after the call
(docs/memory.md). Fixing the threshold keeps every large block in its own mapping for good.
It costs page faults when such blocks are allocated again (measured: the same CPU time as
onnxruntime's own arena, which it replaces).

Only glibc has the knob; elsewhere (musl, macOS) this does nothing and says so.

The same goes for :func:`cap_arenas`: glibc gives each new thread that allocates its own heap
("arena"), up to 8 per core, and memory freed in one arena serves only the threads bound to
it. A daemon has dozens of threads (LanceDB's, uvicorn's, the search pool's), so each arena
keeps its own free space and high-water mark.

:func:`prefer_system_arrow_pool` is the same idea for pyarrow: its default pool is an allocator
it bundles (mimalloc in pyarrow 26), with heaps and retained pages of its own beside glibc's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter numbers (malloc.h)
M_ARENA_MAX = -8
#: blocks from this size on get their own mapping. Below it the heap serves them; ~256 KiB keeps
#: the many small tensors (and Python's objects) on the fast path.
MMAP_THRESHOLD_BYTES = 256 * 1024

#: arenas for ``serve``: one per core of this project's 2-core target. With the default (16
#: here) ``serve`` held ~6 MB more after 300 searches for the same search latency; 1 arena
#: saved no more (docs/memory.md).
SERVE_ARENAS = 2

#: Arrow reads this variable once, when its default memory pool is first asked for.
ARROW_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"

_lock = threading.Lock()
#: mallopt settings this process has made: {parameter: value}
_applied: dict[int, int] = {}


def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018 - present on glibc only
    except (OSError, AttributeError):
        return None
    return libc


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Give every heap block of ``threshold`` bytes or more its own mapping, process-wide, so
    freed large blocks go back to the kernel at once. True if glibc accepted it."""
    if threshold < 4096:
        raise ValueError(f"mmap threshold must be at least 4096 bytes, got {threshold}")
    return _mallopt_once(M_MMAP_THRESHOLD, threshold)


def cap_arenas(count: int = SERVE_ARENAS) -> bool:
    """Let glibc create at most ``count`` heaps ("arenas") process-wide: threads then share
    them, and memory one thread frees is reused by the others instead of staying resident in
    that thread's own arena. Applies to arenas created from now on, so call it before the
    process starts its threads. True if glibc accepted it."""
    if count < 1:
        raise ValueError(f"arena count must be at least 1, got {count}")
    return _mallopt_once(M_ARENA_MAX, count)


def prefer_system_arrow_pool() -> bool:
    """Make pyarrow allocate with the C library's ``malloc`` unless the user chose a pool.

    pyarrow's default pool is an allocator it bundles (mimalloc in pyarrow 26). This project
    hands Arrow little: the rows a search or a reindex batch reads and writes, a few MB at a
    time. That allocator's separate heaps kept ~4 MB more resident in ``serve`` (after its
    first search and after 1,000) than the system pool (docs/memory.md, session 11). Has an effect
    only if called before Arrow's default pool is first used — in practice, before ``pyarrow``
    is imported. True if this call set the variable (False: the user's setting stands)."""
    if ARROW_POOL_VARIABLE in os.environ:
        return False
    os.environ[ARROW_POOL_VARIABLE] = "system"
    return True


def _mallopt_once(param: int, value: int) -> bool:
    """``mallopt(param, value)`` unless this process already set it so; True if glibc
    accepted it (False off glibc)."""
    with _lock:
        if _applied.get(param) == value:
            return True
        libc = _glibc()
        if libc is None:
            return False
        ok = bool(libc.mallopt(param, ctypes.c_int(value)))
        if ok:
            _applied[param] = value
        return ok
