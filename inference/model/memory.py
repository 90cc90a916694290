"""Giving freed memory back to the system after a computation with large temporaries."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc


def release_freed_memory() -> None:
    """Hand memory that Python and the libraries have freed back to the system (glibc keeps it otherwise).

    Called after one-off computations with large temporaries (loading an engine, a traced forward past
    the sliding window), where the process's resident size would stay at the peak.
    """
    gc.collect()
    libc_name = ctypes.util.find_library("c")
    if libc_name:
        libc = ctypes.CDLL(libc_name)
        if hasattr(libc, "malloc_trim"):
            libc.malloc_trim(0)
