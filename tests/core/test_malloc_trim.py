"""The API hands freed heap pages back (VERIFIER_MALLOC_TRIM_S): memory that live blocks
fragment stays in the process's RSS until trimmed."""

from __future__ import annotations

import subprocess
import sys

from verifier_service.core.malloc_trim import start_trimming

# Blocks over 512 bytes come from glibc's malloc (smaller ones from Python's own allocator);
# keeping one in 64 pins most of the freed pages in the heap.
FRAGMENT_THEN_WAIT = """
import os, sys, time
from verifier_service.core.malloc_trim import start_trimming

def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20

blobs = [os.urandom(700) + bytes(i % 7) for i in range(150_000)]
keep = blobs[::64]
del blobs
before = rss_mb()
stop = start_trimming(float(sys.argv[1]))
time.sleep(1.5)
print(before, rss_mb(), stop is not None)
"""


def _run(every_s: str) -> tuple[float, float, bool]:
    done = subprocess.run(
        [sys.executable, "-c", FRAGMENT_THEN_WAIT, every_s],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    before, after, started = done.stdout.split()
    return float(before), float(after), started == "True"


def test_trimming_gives_fragmented_heap_pages_back() -> None:
    before, after, started = _run("0.2")
    assert started
    assert before - after > 50, (before, after)  # ~100 MB freed but pinned, then handed back


def test_zero_turns_it_off() -> None:
    before, after, started = _run("0")
    assert not started
    assert before - after < 10, (before, after)
    assert start_trimming(0) is None
