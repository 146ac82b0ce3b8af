"""Review queue benchmark: "next task" latency with many pending tasks and concurrent reviewers.

A fresh database (PostgreSQL, or a SQLite file in WAL mode as the embedded default runs it) is
migrated and given one queue of N pending review tasks (overlap 2, as rows the ladder would
write; no jobs behind them: only the claim is measured). R reviewer threads then each ask for
their next task C times through `review.service.next_task` in its own committed transaction,
exactly what `POST /v1/review/queues/{queue}/next` runs minus HTTP: expire leases, claim one
unit with one UPDATE ... (SELECT ... FOR UPDATE SKIP LOCKED) statement, insert the lease, write
the audit event, commit. Reviewers keep their leases, so later claims skip ever more taken
tasks and the reviewer's own. By default each reviewer asks again at once (a closed loop: the
worst case, whose latency is mostly queueing for the CPU); `--think-ms` adds a pause between a
reviewer's claims, as people reading a task do.

    .venv/bin/python bench/bench_review_next.py --db postgresql [--tasks 100000] [--reviewers 20]
    .venv/bin/python bench/bench_review_next.py --db sqlite --tasks 20000

With fewer tasks than the claims ask for (`--tasks 200`), the queue runs dry: each reviewer
stops at its first "nothing left", and the run checks that no unit was left untaken then (the
claim must not call a queue empty while another reviewer is only taking a unit).

Prints p50/p95/p99/max of next_task in ms, claims per second, and checks that no task was
leased beyond its overlap. Target: p95 < 50 ms with 20 reviewers on 100,000 tasks (PostgreSQL).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import threading
import time
import uuid
from collections import Counter
from datetime import timedelta

from harness import drop_database, new_database
from sqlalchemy import insert, select

from tiers.human import ReviewConfig
from verifier_service.core.db import get_engine, reset_engine_cache, transaction, utcnow
from verifier_service.core.migrate import upgrade
from verifier_service.review import service
from verifier_service.review.models import ReviewLease, ReviewQueue, ReviewTask
from verifier_service.settings import get_settings

RUBRIC = {"dimensions": [{"name": "quality", "type": "score", "min": 1, "max": 5}]}


def seed(n: int, queue: str) -> None:
    config = ReviewConfig(queue=queue, rubric=RUBRIC, overlap=2)  # type: ignore[arg-type]
    now = utcnow()
    with transaction() as session:
        session.add(ReviewQueue(name=queue, config=config.model_dump(mode="json")))
    batch = 5000
    for start in range(0, n, batch):
        rows = [
            {
                "id": uuid.uuid4().hex,
                "queue": queue,
                "kind": "text",
                "payload": {"text": f"item {i}"},
                "verdicts": [],
                "guidelines": "",
                "rubric": RUBRIC,
                "overlap": 2,
                "min_agreement": 0.667,
                "gold": False,
                "gold_tolerance": 0.0,
                "state": "open",
                "taken": 0,
                "answered": 0,
                "created_at": now + timedelta(microseconds=i),
            }
            for i in range(start, min(n, start + batch))
        ]
        with transaction() as session:
            session.execute(insert(ReviewTask), rows)
    if get_engine().dialect.name == "postgresql":
        with get_engine().connect() as conn:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()


def run(reviewers: int, claims: int, queue: str, think_s: float = 0.0) -> tuple[list[float], int]:
    """Each reviewer's next_task latencies (ms), all together; and how many reviewers were told
    nothing was left (the queue ran dry for them: they stop asking)."""
    latencies: list[float] = []
    dry = 0
    lock = threading.Lock()
    start = threading.Barrier(reviewers)

    def reviewer(index: int) -> None:
        nonlocal dry
        name = f"bench-reviewer-{os.getpid()}-{index}"
        mine = []
        start.wait()
        view = None
        for _ in range(claims):
            t0 = time.perf_counter()
            with transaction() as session:
                view = service.next_task(session, name, queue)
            mine.append((time.perf_counter() - t0) * 1000)
            if view is None:
                break
            if think_s:  # a person reads the task before asking again (jittered)
                time.sleep(random.uniform(0.5, 1.5) * think_s)
        with lock:
            latencies.extend(mine)
            dry += view is None

    threads = [threading.Thread(target=reviewer, args=(i,)) for i in range(reviewers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, dry


def _process(args: tuple[str, int, int, str, float]) -> tuple[list[float], int]:
    """One process of reviewer threads (an API process of its own), on the same database."""
    url, reviewers, claims, queue, think_s = args
    os.environ["VERIFIER_DATABASE__URL"] = url
    get_settings.cache_clear()
    reset_engine_cache()
    run(reviewers, 1, queue)  # warm this process's pool
    return run(reviewers, claims, queue, think_s)


def run_processes(
    url: str, procs: int, reviewers: int, claims: int, queue: str, think_s: float
) -> tuple[list[float], int]:
    with multiprocessing.get_context("spawn").Pool(procs) as pool:
        parts = pool.map(_process, [(url, reviewers // procs, claims, queue, think_s)] * procs)
    return [x for part, _ in parts for x in part], sum(dry for _, dry in parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["postgresql", "sqlite"], default="postgresql")
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--reviewers", type=int, default=20)
    parser.add_argument("--claims", type=int, default=50, help="next_task calls per reviewer")
    parser.add_argument(
        "--think-ms",
        type=float,
        default=0.0,
        help="pause of each reviewer between claims (0: ask again at once, the worst case)",
    )
    parser.add_argument(
        "--procs", type=int, default=1, help="spread the reviewer threads over this many processes"
    )
    args = parser.parse_args()

    url, pg_name = new_database(args.db, "bench_review")
    os.environ["VERIFIER_DATABASE__URL"] = url
    # Reviewers keep every task they claim (the module's docstring): no cap on how many one
    # holds (review.max_live_leases is 3 for people); the spawned processes inherit it.
    os.environ["VERIFIER_REVIEW__MAX_LIVE_LEASES"] = str(args.claims + 2)
    get_settings.cache_clear()
    reset_engine_cache()
    try:
        upgrade(url)
        t0 = time.perf_counter()
        seed(args.tasks, "bench")
        print(f"seeded {args.tasks} tasks on {args.db} in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        if args.procs > 1:
            latencies, dry = run_processes(
                url, args.procs, args.reviewers, args.claims, "bench", args.think_ms / 1000
            )
        else:
            run(args.reviewers, 2, "bench")  # warm the connection pool and caches
            t0 = time.perf_counter()
            latencies, dry = run(args.reviewers, args.claims, "bench", args.think_ms / 1000)
        elapsed = time.perf_counter() - t0
        with transaction() as session:
            leased = Counter(session.scalars(select(ReviewLease.task_id)))
        assert max(leased.values()) <= 2, "a task was leased beyond its overlap"
        untaken = 2 * args.tasks - sum(leased.values())
        if dry == args.reviewers:  # every reviewer was told nothing was left: nothing may be
            assert untaken == 0, f"{untaken} unit(s) never taken, yet the queue said it was dry"
        if dry:
            print(f"the queue ran dry for {dry} reviewer(s); units never taken: {untaken}")
        q = statistics.quantiles(latencies, n=100)
        print(
            f"{args.db}: {args.reviewers} reviewers ({args.procs} process(es), think "
            f"{args.think_ms:g} ms) x {args.claims} next_task on "
            f"{args.tasks} pending tasks: p50 {q[49]:.1f} ms, p95 {q[94]:.1f} ms, "
            f"p99 {q[98]:.1f} ms, max {max(latencies):.1f} ms; "
            f"{len(latencies) / elapsed:.0f} claims/s; max leases per task "
            f"{max(leased.values())} (overlap 2)"
        )
    finally:
        reset_engine_cache()
        if pg_name is not None:
            drop_database(pg_name)


if __name__ == "__main__":
    main()
