"""Giving freed memory back to the system: after a computation with large temporaries, and in a long-lived server
process whose many threads would each keep their own heap (glibc's malloc)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc

M_ARENA_MAX = -8  # glibc's mallopt parameter: the most heaps ("arenas") malloc keeps for the process's threads


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library when it is glibc's (its ``malloc_trim`` and ``mallopt``), else None (musl, macOS, Windows)."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    libc = ctypes.CDLL(name)
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def _trim_heap() -> None:
    """Hand the whole free pages of every malloc heap back to the system."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def limit_heap_arenas(most: int) -> bool:
    """Let malloc keep at most ``most`` heaps for all of the process's threads; whether glibc took it.

    glibc gives each new thread that allocates a heap of its own, up to 8 per core, and memory freed in one heap
    is reused only by the threads on it. A server that runs every session's script in a thread of its own thus
    keeps many partly free heaps whose sum grows with the sessions; fewer heaps share their free memory. Call it
    before the threads start allocating (heaps made before stay)."""
    libc = _libc()
    return libc is not None and libc.mallopt(M_ARENA_MAX, most) == 1


def release_freed_memory() -> None:
    """Hand memory that Python and the libraries have freed back to the system (glibc keeps it otherwise).

    Called after one-off computations with large temporaries (loading an engine, a traced forward past
    the sliding window), where the process's resident size would stay at the peak.
    """
    gc.collect()
    _trim_heap()
