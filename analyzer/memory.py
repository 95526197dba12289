"""Hand memory that Python freed back to the operating system.

    release_freed_memory() -> None

Why: a trace's big columns are numpy arrays (glibc serves them with mmap, and gives them back on free), but its
many small objects (names, shape lists, cost-basis texts) live in the heap, where glibc keeps freed blocks for
reuse instead of returning them. A long-lived process that drops a trace (the dashboard when a session removes a
run) calls this so its RSS falls back: gc first (reference cycles), then glibc's ``malloc_trim(0)``, which returns
free pages from every arena. A no-op where there is no glibc (macOS, musl).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc


@functools.cache
def _malloc_trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> None:
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
