"""Sandbox throughput: isolated executions per second, warm pool vs a plain `docker run` each.

Each execution is a small Python program with assert-style tests (or pytest tests with
--style pytest), run with the same limits (no network, read-only root, tmpfs, memory, pids,
CPU, the judge as root with only SETUID/SETGID/KILL and the candidate under its own uid:
`isolation_options()`) and the same OCI runtime (the setting,
`auto` resolved once and printed) in a container that serves only that candidate. Prints
execs/s, p50/p95 latency per mode and the pool / docker-run ratios.

Two kinds of load:
- sustained (modes pool, run, lifecycle): `--concurrency` candidates in flight without pause for
  `--seconds`; a pool of `--pool-size`. No quiet moment, so the pool starts containers while
  candidates run and the engine's CPU per container bounds the rate (it defers removing used
  ones until 64 wait: the pool mode's last 64 are removed after its timing).
- burst (mode burst): what one RL training step sends. A pool of `--burst` containers is left to
  fill up and settle, then one batch of `--burst` candidates is judged, `--concurrency` at a
  time; execs/s = batch size / the batch's wall time. The same batch then runs with a `docker
  run` each. Also printed: containers the engine created during the pool's batch (0 when the
  pool serves it from warm containers alone) and the quiet time the pool then took to refill.

    .venv/bin/python bench/bench_sandbox.py                  # pool and docker run, ~30 s
    .venv/bin/python bench/bench_sandbox.py --mode all       # also lifecycle and burst, ~1 min
    .venv/bin/python bench/bench_sandbox.py --mode burst --burst 64
    .venv/bin/python bench/bench_sandbox.py --mode all --runtime runc
    .venv/bin/python bench/bench_sandbox.py --mode pool --seconds 20 --concurrency 6
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from harness import embedded
from sandbox_load import candidates, drive, drive_batch

from tiers.base import Candidate, Verdict, VerdictStatus
from tiers.code import pool as pool_module
from tiers.code.engine import (
    JUDGE_USER,
    LABEL,
    OWNER_LABEL,
    check_engine,
    isolation_options,
    resolve_runtime,
)
from tiers.code.harness import harness_program
from tiers.code.pool import SandboxPool
from tiers.code.sandbox import SandboxTier
from tiers.code.settings import SandboxSettings
from verifier_service.settings import get_settings


def job_runner(
    style: str, settings: SandboxSettings, isolation: str, job_size: int
) -> Callable[[int], list[bool]]:
    """Judge job i (`job_size` candidates in one verify_batch, as one request's items reach the
    sandbox worker) in the given isolation; one True per candidate that came out right."""
    tier = SandboxTier(settings)
    items = candidates(style)
    config = {"isolation": isolation}

    def run_one(i: int) -> list[bool]:
        job = [items[(i * job_size + k) % len(items)] for k in range(job_size)]
        verdicts = tier.verify_batch([item for item, _ in job], config)
        return [
            (verdict.status is VerdictStatus.passed) == ok
            for verdict, (_, ok) in zip(verdicts, job, strict=True)
        ]

    return run_one


def bench_pool(
    seconds: float,
    concurrency: int,
    style: str,
    settings: SandboxSettings,
    isolation: str,
    job_size: int,
) -> dict[str, Any]:
    run_one = job_runner(style, settings, isolation, job_size)
    pool = pool_module.get_pool(settings)
    pool.wait_full(30)
    try:
        return drive(run_one, seconds, concurrency)
    finally:
        pool_module.shutdown_pool()


def containers_created(pool: SandboxPool, since: float, until: float) -> int:
    """Containers of `pool` the engine created between two time.time() instants."""
    while time.time() < int(until) + 1:  # the engine's events API counts whole seconds
        time.sleep(0.05)
    events = pool.client.api.events(
        since=datetime.fromtimestamp(int(since)),
        until=datetime.fromtimestamp(int(until) + 1),
        filters={"type": "container", "event": "create", "label": f"{OWNER_LABEL}={pool.owner}"},
        decode=True,
    )
    return sum(since * 1e9 <= e["timeNano"] <= until * 1e9 for e in events)


def bench_burst(
    size: int,
    concurrency: int,
    style: str,
    settings: SandboxSettings,
    isolation: str,
    job_size: int,
) -> dict[str, Any]:
    """One training step: `size` candidates in jobs of `job_size`, `concurrency` jobs at a
    time, on a full, settled pool of `size` warm containers."""
    settings = settings.model_copy(update={"pool_size": size})
    run_one = job_runner(style, settings, isolation, job_size)
    pool = pool_module.get_pool(settings)
    try:
        if not pool.wait_full(120):
            raise SystemExit(f"the pool did not fill to {size} warm containers in 120 s")
        time.sleep(1.0)  # a trainer generates for seconds between steps
        since = time.time()
        result = drive_batch(run_one, max(1, size // job_size), concurrency)
        until = time.time()
        refilled = pool.wait_full(120)
        result["refill_s"] = round(time.time() - until, 2) if refilled else None
        result["created_during_batch"] = containers_created(pool, since, until)
        return result
    finally:
        pool_module.shutdown_pool()


def docker_run_runner(style: str, settings: SandboxSettings) -> Callable[[int], list[bool]]:
    """The same harness and limits, but a new `docker run` (create, start, wait, rm) each time."""
    client = check_engine(settings)
    runtime = settings.runtime  # resolved once in main(), so both modes use the same one
    runner = harness_program()
    items = candidates(style)

    def run_one(i: int) -> list[bool]:
        item, ok = items[i % len(items)]
        spec = {
            "mode": style,
            "code": item.payload["code"],
            "tests": item.payload["tests"],
            "timeout_s": settings.default_timeout_s,
            "output_cap": settings.output_cap_bytes,
            "output_limit": settings.output_limit_bytes,
        }
        api = client.api
        host_config = api.create_host_config(**isolation_options(settings, runtime))
        cid = api.create_container(
            settings.image,
            ["python3", "-I", "-c", runner, json.dumps(spec)],
            user=JUDGE_USER,
            working_dir="/",
            network_disabled=True,
            labels={LABEL: "1"},
            host_config=host_config,
        )["Id"]
        try:
            api.start(cid)
            api.wait(cid, timeout=settings.default_timeout_s + 10)
            out = api.logs(cid, stdout=True, stderr=False)
        finally:
            api.remove_container(cid, force=True)
        report = json.loads(out)
        events = report["run"]["events"]
        results = [e for e in events if e.get("event") == "result"]
        passed = bool(results) and all(e["outcome"] == "passed" for e in results)
        return [passed == ok]

    return run_one


def bench_docker_run(
    seconds: float, concurrency: int, style: str, settings: SandboxSettings
) -> dict[str, Any]:
    return drive(docker_run_runner(style, settings), seconds, concurrency)


def bench_lifecycle(seconds: float, concurrency: int, settings: SandboxSettings) -> dict[str, Any]:
    """The floor under any one-container-per-candidate design: create, start and remove an
    idle locked-down container, running no code at all."""
    pool = pool_module.SandboxPool(settings.model_copy(update={"pool_size": 0}))

    def run_one(_: int) -> list[bool]:
        cid = pool._create()
        pool.client.api.remove_container(cid, force=True)
        return [True]

    try:
        return drive(run_one, seconds, concurrency)
    finally:
        pool.shutdown()


def _container_cpu_s(cid: str) -> float:
    """CPU time used so far by one container's cgroup (v1 cgroupfs, v2 cgroupfs or systemd)."""
    v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage")
    if v1.exists():
        return int(v1.read_text()) / 1e9
    for v2 in (f"/sys/fs/cgroup/docker/{cid}", f"/sys/fs/cgroup/system.slice/docker-{cid}.scope"):
        stat = Path(v2, "cpu.stat")
        if stat.exists():
            fields = dict(line.split() for line in stat.read_text().splitlines())
            return int(fields["usage_usec"]) / 1e6
    raise SystemExit(f"no cgroup CPU counter found for container {cid[:12]}")


def bench_judge(count: int, style: str, settings: SandboxSettings) -> dict[str, Any]:
    """Inside one job's container (isolation "process"): the container's CPU per candidate
    (judge, zygote, candidate, test runner, clean-up; read from its cgroup, so the load of the
    machine changes it little), for `count` candidates in a row, each with HumanEval's
    `from typing import List` on top."""
    from tiers.code.schemas import SandboxConfig
    from tiers.code.session import JobContainer

    tier = SandboxTier(settings)
    cfg = SandboxConfig.model_validate({"isolation": "process"})
    items = []
    for item, _ in candidates(style):
        payload = dict(item.payload, code="from typing import List\n" + item.payload["code"])
        prepared = tier._prepare(Candidate(kind="code", payload=payload), cfg)
        if isinstance(prepared, Verdict):
            raise SystemExit(f"the bench's candidate was not run: {prepared.feedback}")
        items.append(prepared)
    pool = SandboxPool(settings.model_copy(update={"pool_size": 1}))
    job = JobContainer(pool, settings.default_memory_mb)
    try:
        for prepared in items:  # warm-up: the container, the zygote's preload
            job.run(prepared.spec, prepared.limits.timeout_s)
        cid = job.container_ids[-1]
        cpu0, t0 = _container_cpu_s(cid), time.perf_counter()
        for i in range(count):
            prepared = items[i % len(items)]
            job.run(prepared.spec, prepared.limits.timeout_s)
        cpu1, t1 = _container_cpu_s(cid), time.perf_counter()
        if job.container_ids[-1] != cid:
            raise SystemExit("the job changed containers during the measurement")
    finally:
        job.close()
        pool.shutdown()
    return {
        "executions": count,
        "container_cpu_ms_per_exec": round((cpu1 - cpu0) / count * 1000, 1),
        "wall_ms_per_exec": round((t1 - t0) / count * 1000, 1),
        "load": os.getloadavg(),
    }


def bench_service(
    seconds: float, trainers: int, job_size: int, style: str, isolation: str
) -> dict[str, Any]:
    """Through the whole service (`verifier-service dev`: API, Celery workers, SQLite, the
    sandbox worker with its pool): `trainers` clients each POST /v1/rewards with `job_size`
    code items (each unique, so no verdict comes from the cache) and wait for the rewards,
    again and again for `seconds`."""
    import httpx

    items = candidates(style)
    settings = {"VERIFIER_SANDBOX__ISOLATION": isolation}
    # (a loaded machine starts it slowly)
    with embedded(settings, sandbox=True, timeout=300) as service:
        counter = iter(range(1 << 30))
        lock = threading.Lock()

        def run_one(_: int) -> list[bool]:
            with lock:
                first = next(counter) * job_size
            job = [items[(first + k) % len(items)] for k in range(job_size)]
            body = [
                {"kind": "code", "payload": dict(item.payload, code=item.payload["code"]
                                                + f"\n# {first + k}\n")}
                for k, (item, _) in enumerate(job)
            ]  # fmt: skip
            with httpx.Client(base_url=service.url, timeout=120) as client:
                answer = client.post("/v1/rewards", json={"items": body, "wait_s": 60})
                answer.raise_for_status()
                state = answer.json()
                while state["status"] != "completed":
                    time.sleep(0.1)
                    state = client.get(f"/v1/jobs/{state['id']}").json()
            rewards = [i["reward"] for i in sorted(state["items"], key=lambda i: i["index"])]
            return [
                (r["status"] == "scored" and r.get("value") == 1.0) == ok
                for r, (_, ok) in zip(rewards, job, strict=True)
            ]

        drive_batch(run_one, trainers, trainers)  # warm-up: the pool, the workers
        return drive(run_one, seconds, trainers)


def ratio(process: dict[str, Any], container: dict[str, Any]) -> dict[str, float]:
    return {
        "execs_per_s": round(process["execs_per_s"] / container["execs_per_s"], 2),
        "p50": round(process["p50_s"] / container["p50_s"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mode",
        choices=["pool", "run", "lifecycle", "burst", "service", "judge", "both", "all"],
        default="both",
        help="both: sustained pool and docker run; all: also the bare container lifecycle, "
        "the burst, the whole service and the container CPU per candidate (judge)",
    )
    parser.add_argument(
        "--isolation",
        choices=["process", "container", "both"],
        default="both",
        help="pool, burst and service modes: the isolation(s) measured (both: side by side)",
    )
    parser.add_argument("--seconds", type=float, default=12.0, help="sustained: time per mode")
    parser.add_argument("--concurrency", type=int, default=4, help="jobs (requests) in flight")
    parser.add_argument("--job-size", type=int, default=8, help="candidates per job (request)")
    parser.add_argument("--pool-size", type=int, default=4, help="sustained: warm containers")
    parser.add_argument(
        "--burst", type=int, default=32, help="burst: candidates in the batch and pool size"
    )
    parser.add_argument("--style", choices=["script", "pytest"], default="script")
    parser.add_argument(
        "--judge-count", type=int, default=100, help="judge: candidates in one job container"
    )
    parser.add_argument(
        "--runtime", default=None, help="OCI runtime for every mode; default: the setting (auto)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    sandbox = get_settings().sandbox.model_copy(update={"pool_size": args.pool_size})
    if args.runtime:
        sandbox.runtime = args.runtime
    # Resolve "auto" once: the pool and the docker-run baseline then name the same runtime.
    sandbox.runtime = resolve_runtime(sandbox, check_engine(sandbox))
    isolations = ["container", "process"] if args.isolation == "both" else [args.isolation]
    results: dict[str, Any] = {
        "runtime": sandbox.runtime,
        "style": args.style,
        "concurrency": args.concurrency,
        "job_size": args.job_size,
        "pool_size": args.pool_size,
        "burst": args.burst,
        "load_before": os.getloadavg(),
    }
    print(f"runtime {sandbox.runtime}, {args.style} tests, {args.concurrency} jobs of "
          f"{args.job_size} in flight, {os.cpu_count()} CPUs; sustained: pool size "
          f"{args.pool_size}, {args.seconds:g} s per mode; burst: {args.burst} candidates on a "
          f"warm pool of {args.burst}; load average {os.getloadavg()}", flush=True)  # fmt: skip

    def side_by_side(kind: str, measure: Callable[[str], dict[str, Any]]) -> None:
        for isolation in isolations:
            results[f"{kind}_{isolation}"] = measure(isolation)
            print(f"{kind:9} {isolation:9}", json.dumps(results[f"{kind}_{isolation}"]),
                  flush=True)  # fmt: skip
        if len(isolations) == 2:
            results[f"{kind}_process_vs_container"] = ratio(
                results[f"{kind}_process"], results[f"{kind}_container"]
            )
            print(f"{kind:9} process / container",
                  json.dumps(results[f"{kind}_process_vs_container"]), flush=True)  # fmt: skip

    if args.mode in ("pool", "both", "all"):
        side_by_side("sustained", lambda iso: bench_pool(
            args.seconds, args.concurrency, args.style, sandbox, iso, args.job_size))  # fmt: skip
    if args.mode in ("run", "both", "all"):
        results["docker_run"] = bench_docker_run(
            args.seconds, args.concurrency, args.style, sandbox
        )
        print("sustained docker run (one candidate each)", json.dumps(results["docker_run"]),
              flush=True)  # fmt: skip
        for isolation in isolations:
            if f"sustained_{isolation}" in results:
                key = f"sustained_{isolation}_vs_docker_run"
                results[key] = round(
                    results[f"sustained_{isolation}"]["execs_per_s"]
                    / results["docker_run"]["execs_per_s"],
                    2,
                )
                print(f"sustained {isolation} / docker run (execs/s)", results[key], flush=True)
    if args.mode in ("lifecycle", "all"):
        results["lifecycle_only"] = bench_lifecycle(args.seconds, args.concurrency, sandbox)
        print("sustained lifecycle ", json.dumps(results["lifecycle_only"]), flush=True)
    if args.mode in ("burst", "all"):
        side_by_side("burst", lambda iso: bench_burst(
            args.burst, args.concurrency, args.style, sandbox, iso, args.job_size))  # fmt: skip
    if args.mode in ("judge", "all"):
        results["judge_cpu"] = bench_judge(args.judge_count, args.style, sandbox)
        print("judge     process  ", json.dumps(results["judge_cpu"]), flush=True)
    if args.mode in ("service", "all"):
        side_by_side("service", lambda iso: bench_service(
            args.seconds, args.concurrency, args.job_size, args.style, iso))  # fmt: skip
    print(json.dumps(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
