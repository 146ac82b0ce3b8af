"""The garbage collector of a service process, tuned for its allocation pattern.

A batch makes thousands of short-lived objects (ORM rows, pydantic models, JSON) that the
reference counts free; with Python's default young-generation threshold (700 allocations) the
collector still runs every few items and walks whatever the pass holds. Measured on the
all-cached batch path: about a quarter of the CPU (bench/bench_throughput.py). What was
imported at start-up (RDKit, SQLAlchemy, pydantic schemas) is frozen out of every collection.
"""

from __future__ import annotations

import gc


def tune_gc(young_threshold: int) -> None:
    """Freeze what the process holds now and collect the young generation every
    `young_threshold` allocations (0: leave Python's defaults)."""
    if young_threshold <= 0:
        return
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)
