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
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil  # type: ignore[import-untyped]
from harness import backing, cli, direct_calls, judge_stub, make_key, served, stub_plan

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


def most_open(base: str) -> int:
    """The most requests the stub had open at once since its plan was last set."""
    return int(httpx.get(f"{base}/stub/log", timeout=10).json()["most_open"])


def direct(url: str, n: int, in_flight: int) -> float:
    """Items/s of `n` requests from a bare async client, `in_flight` at once."""
    return n / direct_calls(url, n, in_flight)


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


@contextmanager
def service(stub_url: str, in_flight: int, judge_processes: int) -> Iterator[Service]:
    """API + ladder worker + judge worker on a fresh PostgreSQL database and redis-server."""
    endpoint = {"url": f"{stub_url}/v1", "model": "stub", "max_in_flight": in_flight}
    settings = {"VERIFIER_JUDGE__ENDPOINTS": json.dumps({"bench": endpoint})}
    with backing("verifier_judge", settings) as env:
        log = Path(env["VERIFIER_DATA_DIR"]) / "service.log"
        cli(env, "migrate")
        key = make_key(env, "bench", "trainer", "operator")
        workers = [
            ["--queues", "ladder,callbacks", "--concurrency", "1", "--name", "ladder@%h"],
            ["--queues", "tier.judge", "--concurrency", str(judge_processes),
             "--name", "judge@%h"],
        ]  # fmt: skip
        with served(env, workers, log=log) as (url, processes):
            headers = {"Authorization": f"Bearer {key}"}
            made = httpx.post(
                f"{url}/v1/policies", json={"document": POLICY}, headers=headers, timeout=30
            )
            if made.status_code != 201:
                raise SystemExit(f"policy refused: {made.text}")
            yield Service(url, headers, processes)


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
    with judge_stub(REPLY, args.latency) as base:
        url = f"{base}/v1"
        sweep = {c: direct(url, c * args.rounds, c) for c in CONCURRENCY}
        best = max(sweep, key=lambda c: sweep[c])
        n_direct = args.jobs * args.batch
        per_process = max(1, best // args.judge_processes)
        with service(base, per_process, args.judge_processes) as svc:
            through_service(svc, 1, 8, "warm-up")  # imports, connections, the policy cache
            bare, runs, opened = [sweep[best]], [], []
            for r in range(args.repeat):
                stub_plan(base, REPLY, args.latency)  # its log starts again
                runs.append(through_service(svc, args.jobs, args.batch, f"run{r}"))
                opened.append(most_open(base))
                bare.append(direct(url, n_direct, best))
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
