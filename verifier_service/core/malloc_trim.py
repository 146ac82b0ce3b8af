"""Hand freed heap memory back to the system now and then (glibc's `malloc_trim`).

Under steady load the API's live memory is flat, yet its RSS grew a few MB a minute over a
10-minute soak: glibc's heap kept the pages of freed blocks (JSON texts, lists and dicts over
512 bytes, C buffers) that live blocks above them pin in place. `malloc_trim(0)` releases
every free page in the heap, not just its top; it takes milliseconds with the allocator
locked. Elsewhere (musl, macOS) there is no such call and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Callable


def _glibc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def trim_now() -> bool:
    """Release the heap's free pages now; False where the C library has no malloc_trim."""
    trim = _glibc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def start_trimming(every_s: float) -> threading.Event | None:
    """Trim every `every_s` seconds in a daemon thread, until the returned event is set.
    None (nothing started) for 0 or where the C library has no malloc_trim."""
    trim = _glibc_trim()
    if every_s <= 0 or trim is None:
        return None
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every_s):
            trim(0)

    threading.Thread(target=run, name="malloc-trim", daemon=True).start()
    return stop
