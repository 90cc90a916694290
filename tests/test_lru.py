"""The one bounded store shared between sessions (``ui.common.lru.SharedLRU``)."""

from __future__ import annotations

import threading

from ui.common.lru import SharedLRU


def test_the_least_recently_used_goes_first_and_a_read_is_a_use():
    store = SharedLRU[int](max_entries=2)
    store.put("a", 1)
    store.put("b", 2)
    assert store.get("a") == 1  # "a" used after "b"
    store.put("c", 3)  # over the bound: "b", the least recently used, goes
    assert "b" not in store and store.get("a") == 1 and store.get("c") == 3 and len(store) == 2
    assert store.get("missing") is None


def test_threads_putting_at_once_keep_the_bound():
    store = SharedLRU[int](max_entries=16)
    threads = [threading.Thread(target=lambda i=i: [store.put((i, k), k) for k in range(500)]) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(store) == 16
