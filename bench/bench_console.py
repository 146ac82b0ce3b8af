"""Console overview benchmark: the overview of 1 h, 24 h and 7 d over a million stored verdicts,
read from the raw rows and from the rollups, in the same run on the same data.

A fresh database (PostgreSQL, or a SQLite file as the embedded default runs it) is migrated and
given N jobs of one item each, spread evenly over the last 7 days, each item with one verdict
and one cost ledger entry (N of each: 1,000,000 by default), written by INSERT ... SELECT from a
number series. Then, per window, `console.service.overview` runs R times from the raw rows
(`use_rollups=False`: what the console did before rollups), the rollups are built (the first
refresh rolls up the whole week: timed apart), and the overview runs R times again the way the
endpoint does it: a refresh (nothing new to roll up, or the one minute that just closed) in its
own transaction, then the overview from the rollups and the raw rows around them.

    .venv/bin/python bench/bench_console.py --db postgresql [--rows 1000000] [--repeat 3]
    .venv/bin/python bench/bench_console.py --db sqlite

Prints the median (and slowest) time per window of each, their ratio, and the load average.
Target: every window under 200 ms with rollups on PostgreSQL over 1,000,000 verdicts. With
`--keep` the seeded database stays (its URL is printed); `--url` runs on such a database again
(its rollups are dropped first, so the first refresh is timed again), `--no-raw` skips the
raw-row overviews (a week of them takes about a minute each).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from datetime import timedelta

from harness import drop_database, new_database
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from verifier_service.console.overview import rollups, service
from verifier_service.console.overview.schemas import Window
from verifier_service.core.db import make_engine, utcnow
from verifier_service.core.migrate import upgrade

WEEK_S = 7 * 86400


def seed(engine: Engine, n: int) -> None:
    """N one-item jobs over the last week, each with a verdict and a ledger entry."""
    pg = engine.dialect.name == "postgresql"
    start = time.time() - WEEK_S + 60
    step = (WEEK_S - 600) / n
    if pg:
        series = "FROM generate_series(0, :n - 1) AS s(i)"
        at = "to_timestamp(:start + i * :step)"
        later = "to_timestamp(:start + i * :step + 0.5)"
        rand, obj, true, false = "random()", "json_build_object", "true", "false"
    else:
        series = (
            "FROM (WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s "
            "WHERE i < :n - 1) SELECT i FROM s)"
        )
        at = "strftime('%Y-%m-%d %H:%M:%S', :start + i * :step, 'unixepoch') || '.000000'"
        later = "strftime('%Y-%m-%d %H:%M:%S', :start + i * :step + 0.5, 'unixepoch') || '.000000'"
        rand, obj, true, false = "(abs(random()) % 1000000) / 1e6", "json_object", "1", "0"
    tier = "CASE i % 3 WHEN 0 THEN 'chem.fast' WHEN 1 THEN 'schema' ELSE 'chem.surrogate' END"
    policy = "CASE i % 3 WHEN 0 THEN 'drug-likeness' ELSE 'default' END"
    principal = "'trainer-' || (i % 4)"
    status = "CASE i % 10 WHEN 0 THEN 'infra_error' WHEN 1 THEN 'pending' ELSE 'scored' END"
    cached = f"CASE WHEN i % 5 = 0 THEN {true} ELSE {false} END"
    statements = [
        f"""INSERT INTO jobs (id, created_at, principal, request_hash, policy_name,
            policy_version, status, n_items, n_done)
            SELECT 'j' || i, {at}, {principal}, 'h', {policy}, 1, 'completed', 1, 1 {series}""",
        f"""INSERT INTO items (id, job_id, "index", role, kind, candidate, content_hash, state,
            step, reward, dispatches)
            SELECT 'i' || i, 'j' || i, 0, 'item',
                   CASE i % 2 WHEN 0 THEN 'molecule' ELSE 'json' END, '{{}}', 'c' || i, 'done',
                   1, {obj}('status', {status}, 'value', 0.5), 0 {series}""",
        f"""INSERT INTO verdicts (id, item_id, step, tier, tier_version, status, score,
            components, feedback, cpu_s, wall_s, cached, created_at)
            SELECT 'v' || i, 'i' || i, 0, {tier}, '1', 'passed', {rand}, '{{}}', '', 0,
                   exp({rand} * 6 - 7), {cached}, {later} {series}""",
        f"""INSERT INTO cost_ledger (id, job_id, item_id, step, tier, principal, policy_name,
            policy_version, cost_units, cpu_s, wall_s, cached, audit, created_at)
            SELECT 'c' || i, 'j' || i, 'i' || i, 0, {tier}, {principal}, {policy}, 1,
                   CASE WHEN i % 5 = 0 THEN 0 ELSE 0.01 * (i % 7 + 1) END, 0, 0, {cached},
                   {false}, {later} {series}""",
    ]
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement), {"n": n, "start": start, "step": step})
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE" if pg else "ANALYZE"))


def timed_ms(run: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The median and the slowest of `repeat` runs, in ms."""
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), max(times)


def drop_rollups(engine: Engine) -> None:
    """Forget the rollups of an earlier run: the next refresh is a first one."""
    with engine.begin() as conn:
        for table in (
            "console_rollup_state", "console_minute_items", "console_minute_rewards",
            "console_minute_verdicts", "console_minute_cost", "console_hour_items",
            "console_hour_rewards", "console_hour_verdicts", "console_hour_cost",
            "console_walls_upto",
        ):  # fmt: skip
            conn.execute(text(f"DELETE FROM {table}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["postgresql", "sqlite"], default="postgresql")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/0", help="read: queue depths")
    parser.add_argument("--keep", action="store_true", help="keep the seeded database")
    parser.add_argument("--url", help="a database seeded by an earlier --keep run")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw-row overviews")
    args = parser.parse_args()
    if args.url:
        url, name = args.url, None
    else:
        url, name = new_database(args.db, "bench_console")
    engine = make_engine(url)
    try:
        upgrade(url)
        if args.url:
            drop_rollups(engine)
            print(f"on {url} (seeded earlier)")
        else:
            began = time.perf_counter()
            seed(engine, args.rows)
            print(f"{args.db}: {args.rows:,} jobs, items, verdicts and ledger entries over "
                  f"7 days, seeded in {time.perf_counter() - began:.1f} s")  # fmt: skip
        if args.keep:
            print(f"kept: --url {url}")

        def overview(window: Window, use_rollups: bool) -> None:
            if use_rollups:
                with Session(engine) as session, session.begin():
                    service.refresh_rollups(session)
            with Session(engine) as session:
                service.overview(session, window, args.broker, use_rollups=use_rollups)

        for w in Window:  # warm up: imports, connections, the tier registry
            overview(Window.hour if args.no_raw else w, False)
        raw = {
            w: (0.0, 0.0) if args.no_raw else timed_ms(lambda w=w: overview(w, False), args.repeat)
            for w in Window
        }
        began = time.perf_counter()
        with Session(engine) as session, session.begin():
            rollups.refresh(session, utcnow())
        build = time.perf_counter() - began
        rolled = {w: timed_ms(lambda w=w: overview(w, True), args.repeat) for w in Window}
        with Session(engine) as session:
            state = rollups.state(session)
            assert state is not None
            behind = utcnow() - state.closed_until
        print(f"first refresh (rolls up the whole week): {build:.2f} s; "
              f"rolled up to {behind / timedelta(seconds=1):.0f} s ago")  # fmt: skip
        print(f"{'window':>6} {'raw ms':>9} {'rollups ms':>11} {'slowest':>8} {'raw/rollups':>12}")
        for w in Window:
            (r, _), (m, worst) = raw[w], rolled[w]
            print(f"{w.value:>6} {r:>9.1f} {m:>11.1f} {worst:>8.1f} {r / m:>11.1f}x")
        print(f"median of {args.repeat}; load average {os.getloadavg()}")
    finally:
        engine.dispose()
        if name is not None and not args.keep:
            drop_database(name)


if __name__ == "__main__":
    main()
