"""The memory management of a service process, tuned for its allocation pattern.

A batch makes thousands of short-lived objects (ORM rows, pydantic models, JSON) that the
reference counts free; with Python's default young-generation threshold (700 allocations) the
collector still runs every few items and walks whatever the pass holds. Measured on the
all-cached batch path: about a quarter of the CPU (bench/bench_throughput.py). What was
imported at start-up (RDKit, SQLAlchemy, pydantic schemas) is frozen out of every collection.

glibc's malloc gives each thread that allocates an arena of its own (up to 8 per core): the API
runs requests on a pool of threads, and each arena kept its high-water mark, so the API's RSS
grew 2.4 MB a minute through a 10-minute soak while the memory in use stayed flat. With two
arenas it grew 0.5 MB a minute (bench/bench_soak.py, README).
"""

from __future__ import annotations

import ctypes
import gc
import os
import platform

#: mallopt's parameter for the most arenas (glibc's malloc.h).
_M_ARENA_MAX = -8


def tune_gc(young_threshold: int) -> None:
    """Freeze what the process holds now and collect the young generation every
    `young_threshold` allocations (0: leave Python's defaults)."""
    if young_threshold <= 0:
        return
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)


def limit_malloc_arenas(arenas: int) -> bool:
    """Let glibc's malloc make at most `arenas` arenas in this process (before its threads
    start); whether it was applied. Not applied with 0, where `MALLOC_ARENA_MAX` is set (the
    environment's choice wins), or under another C library."""
    if arenas <= 0 or "MALLOC_ARENA_MAX" in os.environ or platform.libc_ver()[0] != "glibc":
        return False
    try:
        return bool(ctypes.CDLL(None).mallopt(_M_ARENA_MAX, arenas))
    except (OSError, AttributeError):
        return False
