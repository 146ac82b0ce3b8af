"""Service CPU per item on the batch path, next to chem.fast's own, before and after, one run.

What a GRPO step costs the service beyond the tier itself, measured in one process on one core
(no HTTP, no broker: the code the API and a tier task run, in the order they run it):

- submit: the request body parsed and validated, the job and its items stored, the first
  ladder pass (cache lookups, ledger rows, dispatch), staged in the outbox;
- worker: a tier task's prepare (claim, read), the tier itself, and the record pass (verdicts,
  cache, ledger, rewards, events), staged; the tier's own CPU is subtracted and shown apart;
- read: the finished job loaded and encoded as the API answers it (JSON bytes).

CPU is this process's plus, on PostgreSQL, the server backend's serving it (psutil). The same
batches then go again as new jobs whose every item is cached: items per second, submit + read.

`--baseline REF` runs the same measurement on the code of git REF (exported to a temp dir and
put first on PYTHONPATH) in the same invocation, so the ratio after/before holds under the
same machine load.

    .venv/bin/python bench/bench_throughput.py [--layout sqlite|postgres|both] [--baseline main]
        [--ref thru]   # a committed tree instead of the working tree
    .venv/bin/python bench/bench_throughput.py --profile worker --sizes 256   # pyinstrument
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import REPO, pg_database, service_env


def nci() -> list[str]:
    from rdkit import RDConfig

    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    return [line.split()[0] for line in path.read_text().splitlines() if line.strip()]


# ---------------------------------------------------------------------------------- the child


class Clock:
    """CPU seconds of this process, plus the PostgreSQL backends it talks to."""

    def __init__(self) -> None:
        self.backends: set[int] = set()

    def watch_backend(self, pid: int) -> None:
        self.backends.add(pid)

    def __call__(self) -> float:
        import psutil

        total = time.process_time()
        for pid in self.backends:
            try:
                times = psutil.Process(pid).cpu_times()
                total += times.user + times.system
            except psutil.Error:
                pass
        return total


def child(args: argparse.Namespace) -> dict[str, Any]:
    """Measure in this process (its environment names the database)."""
    from sqlalchemy import event, text

    from tiers.base import Candidate
    from tiers.registry import get_tier
    from verifier_service.core.db import get_engine, transaction
    from verifier_service.jobs import service as jobs
    from verifier_service.jobs.schemas import RewardRequest
    from verifier_service.ladder import dispatch, execute
    from verifier_service.ladder.runs import prepare_tier_run, record_tier_run

    clock = Clock()
    engine = get_engine()
    if engine.dialect.name == "postgresql":

        @event.listens_for(engine, "connect")
        def _backend(dbapi_connection: Any, _record: Any) -> None:
            with dbapi_connection.cursor() as cursor:
                cursor.execute("select pg_backend_pid()")
                clock.watch_backend(int(cursor.fetchone()[0]))

        with engine.connect() as conn:  # the pool's first connection, watched
            conn.execute(text("select 1"))

    tier_cpu = [0.0]
    real_execute = execute.execute

    def timed_execute(run: Any) -> Any:
        started = time.process_time()
        try:
            return real_execute(run)
        finally:
            tier_cpu[0] += time.process_time() - started

    pool = nci()
    offset = [0]

    def molecules(n: int) -> list[str]:
        out = pool[offset[0] : offset[0] + n]
        offset[0] += n
        return out

    def body(smiles: list[str]) -> bytes:
        items = [{"kind": "molecule", "payload": {"smiles": s}} for s in smiles]
        return json.dumps({"items": items}).encode()

    def submit(raw: bytes) -> tuple[str, list[Any]]:
        request = RewardRequest.model_validate_json(raw)
        with transaction() as session:
            submission = jobs.submit(session, request, principal="bench", idempotency_key=None)
            dispatch.stage(session, submission.ladder)
            return submission.job.id, list(submission.ladder.dispatches)

    def work(dispatches: list[Any]) -> None:
        for d in dispatches:
            with transaction() as session:
                # The keys the sending pass derived, as a tier task gets them (a baseline tree
                # from before they travelled with the work keys its items again).
                known = dict(zip(d.item_ids, d.keys, strict=True)) if getattr(d, "keys", ()) else {}
                extra = {"keys": known} if known else {}
                run = prepare_tier_run(
                    session, d.tier, d.kind, d.step, list(d.item_ids), "bench", **extra
                )
            assert run is not None
            verdicts = timed_execute(run)
            with transaction() as session:
                result = record_tier_run(session, run, verdicts, list(d.item_ids))
                dispatch.stage(session, result)
                assert not result.dispatches, "chem.fast is the last fast step"

    def read(job_id: str) -> bytes:
        with transaction() as session:
            out = jobs.job_out(session, job_id)
        assert out.status == "completed", out.status
        return out.model_dump_json().encode()

    def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
        cpu0, wall0 = clock(), time.perf_counter()
        value = fn()
        return value, clock() - cpu0, time.perf_counter() - wall0

    tier = get_tier("chem.fast")
    # Warm-up: imports, policy cache, statement caches.
    job_id, ds = submit(body(molecules(16)))
    work(ds)
    read(job_id)
    try:  # the garbage collector as the API and worker processes run it (the setting)
        from verifier_service.core.gc_tuning import tune_gc
        from verifier_service.settings import get_settings

        tune_gc(get_settings().gc_young_threshold)
    except ImportError:  # a baseline from before the setting
        pass

    figures: dict[str, Any] = {"sizes": {}}
    profiler = None
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005)
    for size in args.sizes:
        rows: dict[str, float] = {}
        batches = [molecules(size) for _ in range(args.repeats)]
        bare_cpu = 0.0
        for smiles in batches:  # the tier alone on the same molecules (fresh RDKit work)
            candidates = [Candidate(kind="molecule", payload={"smiles": s}) for s in smiles]
            started = time.process_time()
            tier.verify_batch(candidates, {})
            bare_cpu += time.process_time() - started
        n = size * args.repeats
        submit_cpu = work_cpu = read_cpu = 0.0
        tier_cpu[0] = 0.0
        for smiles in batches:
            raw = body(smiles)
            if profiler is not None and args.profile == "submit":
                profiler.start()
            (job_id, ds), cpu, _ = timed(lambda raw=raw: submit(raw))
            if profiler is not None and args.profile == "submit":
                profiler.stop()
            submit_cpu += cpu
            if profiler is not None and args.profile == "worker":
                profiler.start()
            _, cpu, _ = timed(lambda ds=ds: work(ds))
            if profiler is not None and args.profile == "worker":
                profiler.stop()
            work_cpu += cpu
            _, cpu, _ = timed(lambda job_id=job_id: read(job_id))
            read_cpu += cpu
        service_ms = (submit_cpu + work_cpu - tier_cpu[0] + read_cpu) / n * 1000
        rows["bare_tier_ms_per_item"] = bare_cpu / n * 1000
        rows["tier_in_service_ms_per_item"] = tier_cpu[0] / n * 1000
        rows["submit_ms_per_item"] = submit_cpu / n * 1000
        rows["worker_ms_per_item_less_tier"] = (work_cpu - tier_cpu[0]) / n * 1000
        rows["read_ms_per_item"] = read_cpu / n * 1000
        rows["service_ms_per_item"] = service_ms
        rows["service_over_tier"] = service_ms / rows["bare_tier_ms_per_item"]
        rows["total_over_tier"] = 1 + rows["service_over_tier"]
        # The same molecules again as new jobs: every item answered by the cache.
        cached_cpu = cached_wall = 0.0
        for smiles in batches:
            raw = body(smiles)

            def answered(raw: bytes = raw) -> None:
                job_id, ds = submit(raw)
                assert not ds, "every item should be cached"
                read(job_id)

            if profiler is not None and args.profile == "cached":
                profiler.start()
            _, cpu, wall = timed(answered)
            if profiler is not None and args.profile == "cached":
                profiler.stop()
            cached_cpu += cpu
            cached_wall += wall
        rows["cached_items_per_s"] = n / cached_wall
        rows["cached_ms_per_item"] = cached_cpu / n * 1000
        figures["sizes"][str(size)] = {k: round(v, 3) for k, v in rows.items()}
    if profiler is not None:
        figures["profile"] = profiler.output_text(unicode=False, color=False, show_all=False)
    return figures


# --------------------------------------------------------------------------------- the parent


@contextmanager
def database(layout: str) -> Iterator[dict[str, str]]:
    """Environment for a child: a fresh database of the layout, migrated and seeded."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        env = service_env(tmp)
        if layout == "postgres":
            env["VERIFIER_DATABASE__URL"] = stack.enter_context(pg_database("verifier_thru"))
        else:
            env["VERIFIER_DATABASE__URL"] = f"sqlite:///{tmp}/bench.db"
        yield env


def run_child(layout: str, code: Path, args: argparse.Namespace) -> dict[str, Any]:
    with database(layout) as env, tempfile.NamedTemporaryFile(suffix=".json") as out:
        env["PYTHONPATH"] = str(code)
        subprocess.run(
            [sys.executable, "-m", "verifier_service", "migrate"],
            env=env, cwd=code, check=True, capture_output=True,
        )  # fmt: skip
        command = [
            sys.executable, str(REPO / "bench" / "bench_throughput.py"), "--child", out.name,
            "--sizes", *map(str, args.sizes), "--repeats", str(args.repeats),
        ]  # fmt: skip
        if args.profile:
            command += ["--profile", args.profile]
        subprocess.run(command, env=env, cwd=code, check=True)
        return dict(json.loads(Path(out.name).read_text()))


@contextmanager
def exported(ref: str) -> Iterator[Path]:
    """The tree of a git ref, in a temp dir."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "archive", ref], cwd=REPO, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--layout", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--repeats", type=int, default=3, help="batches per size")
    parser.add_argument("--baseline", help="git ref to measure first, e.g. main")
    parser.add_argument("--ref", help="git ref to measure instead of the working tree")
    parser.add_argument(
        "--profile", choices=["submit", "worker", "cached"], help="pyinstrument one phase"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        args.child.write_text(json.dumps(child(args)))
        return

    layouts = ["sqlite", "postgres"] if args.layout == "both" else [args.layout]
    results: dict[str, dict[str, Any]] = {}
    load = os.getloadavg()
    for layout in layouts:
        if args.baseline:
            with exported(args.baseline) as code:
                results[f"{layout} {args.baseline}"] = run_child(layout, code, args)
        if args.ref:
            with exported(args.ref) as code:
                results[f"{layout} {args.ref}"] = run_child(layout, code, args)
        else:
            results[f"{layout} this"] = run_child(layout, REPO, args)
    load = tuple(round((a + b) / 2, 2) for a, b in zip(load, os.getloadavg(), strict=True))
    print(f"load average (mean of start and end): {load}; {os.cpu_count()} cores")
    keys = [
        "bare_tier_ms_per_item", "submit_ms_per_item", "worker_ms_per_item_less_tier",
        "read_ms_per_item", "service_ms_per_item", "service_over_tier", "total_over_tier",
        "cached_items_per_s", "cached_ms_per_item",
    ]  # fmt: skip
    for size in map(str, args.sizes):
        print(f"\nbatch of {size} chem.fast molecules ({args.repeats} batches)")
        print(f"{'':32}" + "".join(f"{name:>22}" for name in results))
        for key in keys:
            cells = "".join(f"{r['sizes'][size][key]:>22}" for r in results.values())
            print(f"{key:32}{cells}")
        if args.baseline:
            for layout in layouts:
                before = results[f"{layout} {args.baseline}"]["sizes"][size]
                after = results[f"{layout} {args.ref or 'this'}"]["sizes"][size]
                print(
                    f"{layout}: service CPU per item after/before "
                    f"{after['service_ms_per_item'] / before['service_ms_per_item']:.2f}; "
                    f"cached items/s after/before "
                    f"{after['cached_items_per_s'] / before['cached_items_per_s']:.2f}"
                )
    for name, figures in results.items():
        if "profile" in figures:
            print(f"\n---- profile ({args.profile}), {name}\n{figures['profile']}")
    if args.json:
        kept = {n: {k: v for k, v in r.items() if k != "profile"} for n, r in results.items()}
        args.json.write_text(json.dumps({"load": load, **kept}, indent=2) + "\n")


if __name__ == "__main__":
    main()
