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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
#: blocks from this size on get their own mapping. Below it the heap serves them; ~256 KiB keeps
#: the many small tensors (and Python's objects) on the fast path.
MMAP_THRESHOLD_BYTES = 256 * 1024

_lock = threading.Lock()
_applied: int | None = None


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
    global _applied
    if threshold < 4096:
        raise ValueError(f"mmap threshold must be at least 4096 bytes, got {threshold}")
    with _lock:
        if _applied == threshold:
            return True
        libc = _glibc()
        if libc is None:
            return False
        ok = bool(libc.mallopt(M_MMAP_THRESHOLD, ctypes.c_int(threshold)))
        if ok:
            _applied = threshold
        return ok
