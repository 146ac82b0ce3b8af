"""Random ids for rows: 128 bits from the operating system's random source, as 32 hex digits.

A batch makes three ids per item (item, verdict, ledger row); `uuid.uuid4().hex` asked the
kernel for 16 bytes each time and built a UUID object around them, about 5% of the CPU of an
all-cached batch. Here each thread takes 256 ids' worth of bytes at once. A forked process
(Celery's pool) forgets the bytes its parent had not used yet, so no two processes hand out
the same id.
"""

from __future__ import annotations

import os
import threading

_IDS_PER_READ = 256


class _Buffered(threading.local):
    def __init__(self) -> None:
        self.ids: list[str] = []


_buffered = _Buffered()


def new_id() -> str:
    """A new random id (32 lowercase hex digits)."""
    ids = _buffered.ids
    if not ids:
        raw = os.urandom(16 * _IDS_PER_READ).hex()
        ids.extend(raw[i : i + 32] for i in range(0, len(raw), 32))
    return ids.pop()


def _forget_after_fork() -> None:
    _buffered.ids.clear()  # the forking thread is the child's only thread


os.register_at_fork(after_in_child=_forget_after_fork)
