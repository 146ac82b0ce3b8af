"""Benchmark: `judge.llm` throughput through the live service against the same model server
called directly at its best concurrency, in one run, and the service's CPU per judged item.

The model server is the FAULT-INJECTION STUB of the OpenAI protocol (tests/tiers/judge/
judge_stub.py) run as its own process, every answer after `--latency` seconds: a stand-in of
fixed latency, not a model, so the ratio measures the service's overhead (a real server's
latency and batching decide real throughput). One run, one machine:

1. direct: the same chat-completion requests from a bare httpx async client at 1, 4, 8 and 16
   in flight; the best concurrency is the server's best (for this stub: the most tried);
2. service: the API, a ladder worker (ladder, callbacks) and a judge worker (tier.judge,
   `--judge-processes` processes as compose runs it, each with the endpoint's `max_in_flight`
   = best concurrency / processes: the service holds at most as many requests open as the
   direct client did), on a PostgreSQL database and a redis-server of this run's own; a
   trainer posts `--jobs` jobs of `--batch` distinct text items at once under a policy whose
   ladder is `judge.llm` alone, and waits for every reward;
3. direct at the best concurrency and the service again, alternating `--repeat` times; the
   best of each counts (a shared machine).

Figures: items/s of each, `service_over_direct` (target at least 0.9), and the service's CPU
per judged item: user + system seconds of the API and both workers' process trees (psutil;
PostgreSQL and Redis not counted) over the service runs, per item.

    .venv/bin/python bench/bench_judge_service.py                    # ~2 min
    .venv/bin/python bench/bench_judge_service.py --latency 1.0 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil  # type: ignore[import-untyped]

REPO = Path(__file__).resolve().parents[1]
STUB = REPO / "tests" / "tiers" / "judge" / "judge_stub.py"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REPLY = '{"score": 7, "confidence": 0.9, "reasoning": "mostly right"}'
CONCURRENCY = (1, 4, 8, 16)
POLICY = {
    "name": "bench-judge",
    "ladders": {
        "text": [
            {
                "tier": "judge.llm",
                "config": {
                    "endpoint": "bench",
                    "rubric": {"criteria": "Is it right?", "scale": {"min": 0, "max": 10}},
                },
            }
        ]
    },
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_stub(latency: float) -> tuple[subprocess.Popen[bytes], str]:
    """The stub as its own process, answering every request after `latency` seconds."""
    port = free_port()
    process = subprocess.Popen([sys.executable, str(STUB), str(port)], cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            plan = {"plan": [], "default": {"content": REPLY, "delay_s": latency}}
            httpx.post(f"{base}/stub/plan", json=plan, timeout=2).raise_for_status()
            return process, base
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                process.kill()
                raise
            time.sleep(0.1)


def most_open(base: str) -> int:
    """The most requests the stub had open at once since its plan was last set."""
    return int(httpx.get(f"{base}/stub/log", timeout=10).json()["most_open"])


def reset_log(base: str, latency: float) -> None:
    plan = {"plan": [], "default": {"content": REPLY, "delay_s": latency}}
    httpx.post(f"{base}/stub/plan", json=plan, timeout=5).raise_for_status()


def direct(url: str, n: int, in_flight: int) -> float:
    """Items/s of `n` requests from a bare async client, `in_flight` at once."""
    body = {"model": "stub", "messages": [{"role": "user", "content": "x"}], "max_tokens": 512}

    async def run() -> None:
        slots = asyncio.Semaphore(in_flight)
        limits = httpx.Limits(max_connections=in_flight)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:

            async def one(i: int) -> None:
                async with slots:
                    response = await client.post(
                        f"{url}/chat/completions", json={**body, "seed": i}
                    )
                    response.raise_for_status()

            await asyncio.gather(*(one(i) for i in range(n)))

    started = time.perf_counter()
    asyncio.run(run())
    return n / (time.perf_counter() - started)


@dataclass
class Service:
    """The running service: its URL, a trainer's headers, the processes measured."""

    url: str
    headers: dict[str, str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def cpu_s(self) -> float:
        """User + system CPU seconds of the API and workers, their children included."""
        total = 0.0
        for process in self.processes:
            try:
                root = psutil.Process(process.pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                continue
            for member in tree:
                try:
                    times = member.cpu_times()
                except psutil.Error:
                    continue
                total += times.user + times.system
        return total


def _cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "verifier_service", *args],
        env=env, cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def _start(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "verifier_service", *args],
        env=env, cwd=REPO, stdout=log.open("ab"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


@contextmanager
def service(stub_url: str, in_flight: int, judge_processes: int) -> Iterator[Service]:
    """API + ladder worker + judge worker on a fresh PostgreSQL database and redis-server."""
    import psycopg

    name = f"verifier_judge_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    redis_port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        redis = subprocess.Popen(
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        endpoint = {"url": f"{stub_url}/v1", "model": "stub", "max_in_flight": in_flight}
        env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
        env.update(
            VERIFIER_DATA_DIR=tmp,
            VERIFIER_LOG_LEVEL="WARNING",
            OMP_NUM_THREADS="1",
            VERIFIER_DATABASE__URL=f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}",
            VERIFIER_BROKER__URL=f"redis://127.0.0.1:{redis_port}/0",
            VERIFIER_AUTH__SECRET_KEY=uuid.uuid4().hex,
            VERIFIER_JUDGE__ENDPOINTS=json.dumps({"bench": endpoint}),
        )
        port = free_port()
        processes: list[subprocess.Popen[bytes]] = []
        log = Path(tmp) / "service.log"
        try:
            time.sleep(0.5)
            _cli(env, "migrate")
            key = _cli(
                env, "keys", "create", "--role", "trainer", "--role", "operator", "--name",
                "bench", "--requests-per-min", "0", "--items-per-min", "0",
            )  # fmt: skip
            processes.append(
                _start(env, log, "worker", "--queues", "ladder,callbacks", "--concurrency", "1",
                       "--name", "ladder@%h")
            )  # fmt: skip
            processes.append(
                _start(env, log, "worker", "--queues", "tier.judge", "--concurrency",
                       str(judge_processes), "--name", "judge@%h")
            )  # fmt: skip
            processes.append(_start(env, log, "api", "--port", str(port)))
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit(f"the service did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.3)
            headers = {"Authorization": f"Bearer {key}"}
            made = httpx.post(
                f"{url}/v1/policies", json={"document": POLICY}, headers=headers, timeout=30
            )
            if made.status_code != 201:
                raise SystemExit(f"policy refused: {made.text}")
            yield Service(url, headers, processes)
        finally:
            for process in processes:
                os.killpg(process.pid, signal.SIGTERM)
            for process in processes:
                process.wait(timeout=60)
            redis.kill()
            redis.wait(timeout=10)
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def through_service(svc: Service, jobs: int, batch: int, tag: str) -> dict[str, float]:
    """Post `jobs` jobs of `batch` distinct items at once; items/s until every reward is in,
    and the service's CPU seconds over that time."""

    async def one(client: httpx.AsyncClient, j: int) -> int:
        items = [
            {"kind": "text", "payload": {"text": f"answer {tag} {j} {i}"}} for i in range(batch)
        ]
        body = {"policy": POLICY["name"], "items": items, "wait_s": 120}
        response = await client.post("/v1/rewards", json=body)
        if response.status_code not in (200, 202):
            raise SystemExit(f"POST /v1/rewards: {response.status_code} {response.text}")
        job = response.json()
        while job["status"] != "completed":
            await asyncio.sleep(0.1)
            job = (await client.get(response.headers["location"])).json()
        scored = [i for i in job["items"] if i["reward"]["status"] == "scored"]
        if len(scored) != batch:
            bad = next(i for i in job["items"] if i["reward"]["status"] != "scored")
            raise SystemExit(f"{batch - len(scored)} of {batch} items not scored: {bad}")
        return len(scored)

    async def run() -> int:
        async with httpx.AsyncClient(base_url=svc.url, headers=svc.headers, timeout=180) as c:
            return sum(await asyncio.gather(*(one(c, j) for j in range(jobs))))

    cpu0, started = svc.cpu_s(), time.perf_counter()
    n = asyncio.run(run())
    wall = time.perf_counter() - started
    cpu = svc.cpu_s() - cpu0
    return {"items": n, "items_per_s": n / wall, "wall_s": wall, "cpu_ms_per_item": 1000 * cpu / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.2, help="the stub's seconds per answer")
    parser.add_argument("--jobs", type=int, default=8, help="jobs posted at once per run")
    parser.add_argument("--batch", type=int, default=64, help="items per job")
    parser.add_argument("--rounds", type=int, default=12, help="direct: requests per slot")
    parser.add_argument(
        "--judge-processes", type=int, default=2,
        help="judge worker processes; each holds best concurrency / this many requests open",
    )  # fmt: skip
    parser.add_argument("--repeat", type=int, default=2, help="direct and service, alternating")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    stub, base = start_stub(args.latency)
    url = f"{base}/v1"
    try:
        sweep = {c: direct(url, c * args.rounds, c) for c in CONCURRENCY}
        best = max(sweep, key=lambda c: sweep[c])
        n_direct = args.jobs * args.batch
        per_process = max(1, best // args.judge_processes)
        with service(base, per_process, args.judge_processes) as svc:
            through_service(svc, 1, 8, "warm-up")  # imports, connections, the policy cache
            bare, runs, opened = [sweep[best]], [], []
            for r in range(args.repeat):
                reset_log(base, args.latency)
                runs.append(through_service(svc, args.jobs, args.batch, f"run{r}"))
                opened.append(most_open(base))
                bare.append(direct(url, n_direct, best))
    finally:
        stub.terminate()
        stub.wait(timeout=10)
    served = max(runs, key=lambda f: f["items_per_s"])
    figures = {
        "stub_latency_s": args.latency,
        "direct_sweep_items_per_s": sweep,
        "best_concurrency": best,
        "judge_processes": args.judge_processes,
        "max_in_flight_per_process": per_process,
        "direct_items_per_s": max(bare),
        "service": served,
        "service_runs": runs,
        "service_most_open": max(opened),
        "service_over_direct": served["items_per_s"] / max(bare),
        "cpu_ms_per_item_mean": sum(r["cpu_ms_per_item"] for r in runs) / len(runs),
    }
    cpu_text = ", ".join(f"{r['cpu_ms_per_item']:.1f}" for r in runs)
    sweep_text = ", ".join(f"{c}: {v:.1f}" for c, v in sweep.items())
    print(
        f"model server: the judge STUB (tests/tiers/judge/judge_stub.py), "
        f"{args.latency * 1000:.0f} ms per answer\n"
        f"direct (httpx), items/s by requests in flight: {sweep_text}; best {best}\n"
        f"direct at {best} in flight   {max(bare):8.1f} items/s  (best of {len(bare)})\n"
        f"through the service      {served['items_per_s']:8.1f} items/s  ({args.jobs} jobs x "
        f"{args.batch} items at once; {args.judge_processes} judge processes x max_in_flight "
        f"{per_process}; the stub saw at most "
        f"{max(opened)} open)\n"
        f"service / direct: {figures['service_over_direct']:.2f}\n"
        f"service CPU per judged item (API + workers): "
        f"{cpu_text} ms"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
