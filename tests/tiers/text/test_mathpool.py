"""The math comparison pool: real child processes, capped in memory, killed at their deadline,
usable from threads (the API's inline lane) and from forked processes (Celery prefork)."""

from __future__ import annotations

import json
import multiprocessing
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from tiers.text.mathpool import MathOutcome, MathPool, _Child, pool_for


@pytest.fixture
def pool() -> Iterator[MathPool]:
    pool = MathPool(size=2, memory_mb=768, start_timeout_s=60)
    yield pool
    pool.close()


def _children(pool: MathPool) -> list[int]:
    return [child.proc.pid for child in pool._idle]


def test_children_run_under_the_memory_cap(pool: MathPool) -> None:
    pool.warm()
    (pid,) = _children(pool)
    limits = Path(f"/proc/{pid}/limits").read_text().splitlines()
    (line,) = [row for row in limits if row.startswith("Max address space")]
    assert line.split()[3:5] == [str(768 * 1024 * 1024)] * 2


def test_a_runaway_is_killed_at_its_deadline_and_replaced(pool: MathPool) -> None:
    pool.warm()
    (old,) = _children(pool)
    started = time.monotonic()
    outcome = pool.compare("99999999!", ["5"], timeout_s=1.0)
    assert time.monotonic() - started < 1.5
    assert outcome.kind == "timeout"
    assert outcome.message == "no answer within 1 s"
    assert not psutil.pid_exists(old)  # killed and reaped, not left running
    assert pool.compare("\\frac{1}{2}", ["0.5"], timeout_s=5.0).equal
    assert _children(pool) != [old]


def test_callers_on_many_threads_share_the_pool(pool: MathPool) -> None:
    def one(i: int) -> MathOutcome:
        return pool.compare(f"\\frac{{{i}}}{{2}}", [str(i / 2)], timeout_s=30.0)

    with ThreadPoolExecutor(6) as threads:
        outcomes = list(threads.map(one, range(1, 13)))
    assert all(o.kind == "ok" and o.equal for o in outcomes), outcomes
    assert len(_children(pool)) <= pool.size


def _in_forked_child(queue: multiprocessing.Queue[tuple[str, bool, bool]]) -> None:
    parent_pool = pool_for(1, 768, 60.0)
    outcome = parent_pool.compare("2\\sqrt{2}", ["\\sqrt{8}"], timeout_s=30.0)
    queue.put(
        (
            outcome.kind,
            outcome.equal,
            parent_pool.owner_pid == multiprocessing.current_process().pid,
        )
    )


def test_a_forked_process_gets_a_pool_of_its_own() -> None:
    inherited = pool_for(1, 768, 60.0)
    inherited.warm()  # a pool with a live child, as in a Celery parent before it forks
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[tuple[str, bool, bool]] = context.Queue()
    process = context.Process(target=_in_forked_child, args=(queue,))
    process.start()
    kind, equal, own = queue.get(timeout=60)
    process.join(10)
    assert (kind, equal, own) == ("ok", True, True)
    assert inherited.compare("1", ["1.0"], timeout_s=30.0).equal  # the parent's still works


def test_a_child_orphaned_mid_request_ends_itself_by_its_cpu_cap() -> None:
    # Its caller goes away without killing it, as a worker killed at its task time limit does:
    # nobody is left to enforce the deadline, so the child's per-request CPU cap must.
    child = _Child(memory_mb=768, start_timeout_s=60)
    assert child.proc.stdin is not None
    request = {"answer": "99999999!", "references": ["5"], "cpu_limit_s": 1.0}
    child.proc.stdin.write(json.dumps(request).encode() + b"\n")
    child.proc.stdin.flush()
    try:
        code = child.proc.wait(timeout=30)
    finally:
        child.kill()
    assert code == -signal.SIGXCPU
