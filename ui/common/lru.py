"""The one bounded store the pages share between sessions (``cachetools.LRUCache`` behind a lock).

``st.cache_data`` is the pages' cache for plain results; this is for what it cannot hold: values shared by every
session of a server that are computed outside a cached function (a long measurement drawing its own progress bar),
or that are claimed while being computed (``ui.sampling.compute.ContinuationStore``).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

from cachetools import LRUCache

V = TypeVar("V")


class SharedLRU(Generic[V]):
    """A thread-safe least-recently-used store of at most ``max_entries`` values (a read counts as a use)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: LRUCache[Hashable, V] = LRUCache(maxsize=max_entries)
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: Hashable, value: V) -> V:
        with self._lock:
            self._entries[key] = value
        return value

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
