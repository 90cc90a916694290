"""Torch CPU threads: the one function every entry point calls, and what the setting means.

Entry points (the app, the command line, each benchmark, the server's worker) call
``set_threads`` once with their own documented setting; library code never changes
the process's thread count on its own.

With torch's OpenMP backend the count is a process-wide value that a thread adopts the
first time it runs parallel work, and that the calling thread applies at once. So a
call before any work reaches every thread started afterwards (Streamlit runs each
script run in a fresh thread), and a long-lived thread that sets its own (the server
worker) keeps it.
"""

from __future__ import annotations

import os

import torch


def available_cores() -> int:
    """CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def set_threads(count: int | None) -> int:
    """Use ``count`` torch intra-op threads (``None``: every available core); returns the count set."""
    count = available_cores() if count is None else int(count)
    if count < 1:
        raise ValueError(f"threads must be >= 1, got {count}")
    if torch.get_num_threads() != count:
        torch.set_num_threads(count)
    return count
