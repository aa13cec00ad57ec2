"""Named thread pools shared by the whole process, apart from the event loop's default
pool (which `asyncio.to_thread` uses for synthesis and the caller-hint encoder): work of
one kind cannot starve another of threads."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

_pools: dict[str, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def named_pool(name: str, threads: int) -> ThreadPoolExecutor:
    """The process's pool called `name` (its threads named `name-…`), made on first use
    with `threads` threads."""
    with _lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ThreadPoolExecutor(threads, thread_name_prefix=name)
        return pool
