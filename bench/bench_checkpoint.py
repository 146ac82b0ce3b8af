"""What a one-item request's commit costs on the embedded default (SQLite in WAL mode), with the
log checkpointed by the API's background thread (the default) and by commits (SQLite's way,
`VERIFIER_DATABASE__SQLITE_CHECKPOINT_S=0`), in one run.

Each mode runs in a child process of its own on a fresh SQLite file: the inline lane's
`submit_and_send` of a cached one-molecule request, `--n` times back to back (no HTTP, no tier
work: what is left is the service's own writes), timing each commit and each submit. The modes take
turns, `--rounds` times each, so both see the same machine. Printed: median, mean, p99 and
max of the commits and the submits, per mode, and the size the log file reached.

    .venv/bin/python bench/bench_checkpoint.py [--n 1500] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_load import percentile

REPO = Path(__file__).resolve().parents[1]
#: The setting in each mode: the default, and commits checkpointing as SQLite does.
MODES = {"background": "0.2", "commits": "0"}


def child(n: int) -> dict[str, Any]:
    """Time `n` cached one-item submits in this process (its environment names the database)."""
    import sqlalchemy.engine.default as default

    from verifier_service.app import _wal_checkpointer
    from verifier_service.auth.schemas import AuthenticatedPrincipal
    from verifier_service.jobs.schemas import RewardRequest
    from verifier_service.jobs.service import submit_and_send as _submit
    from verifier_service.settings import get_settings

    settings = get_settings()
    checkpointer = _wal_checkpointer(settings)  # what the API's lifespan starts, if anything
    commits: list[float] = []
    real_commit = default.DefaultDialect.do_commit

    def timed_commit(self: Any, dbapi_connection: Any) -> None:
        started = time.perf_counter()
        real_commit(self, dbapi_connection)
        commits.append(time.perf_counter() - started)

    default.DefaultDialect.do_commit = timed_commit  # type: ignore[method-assign]
    principal = AuthenticatedPrincipal(name="bench", roles=frozenset({"trainer"}), via="local")
    body = json.dumps({"items": [{"kind": "molecule", "payload": {"smiles": "CCO"}}], "wait_s": 5})
    for _ in range(50):  # warm-up, and the molecule's verdict cached
        _submit(RewardRequest.model_validate_json(body), principal, None, inline=True)
    commits.clear()
    submits: list[float] = []
    for _ in range(n):
        request = RewardRequest.model_validate_json(body)
        started = time.perf_counter()
        _submit(request, principal, None, inline=True)
        submits.append(time.perf_counter() - started)
    if checkpointer is not None:
        checkpointer.stop()
    wal = Path(settings.database_url.split("///", 1)[1] + "-wal")
    return {
        "commit_ms": [c * 1000 for c in commits],
        "submit_ms": [s * 1000 for s in submits],
        "log_file_mb": wal.stat().st_size / 2**20 if wal.exists() else 0.0,
    }


def run_child(mode: str, n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
        env |= {
            "VERIFIER_DATA_DIR": tmp,
            "VERIFIER_LOG_LEVEL": "WARNING",
            "VERIFIER_DATABASE__SQLITE_CHECKPOINT_S": MODES[mode],
            # The lane needs no broker for a cached item; dispatch finds nothing to send.
            "VERIFIER_BROKER__URL": os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/9"),
            "PYTHONPATH": str(REPO),
        }
        out = Path(tmp) / "figures.json"
        migrate = [sys.executable, "-m", "verifier_service", "migrate"]  # and the policies
        subprocess.run(migrate, env=env, cwd=REPO, check=True, capture_output=True)
        command = [sys.executable, __file__, "--child", str(out), "--n", str(n)]
        subprocess.run(command, env=env, cwd=REPO, check=True)
        figures: dict[str, Any] = json.loads(out.read_text())
        return figures


def summary(xs: list[float]) -> str:
    return (
        f"median {statistics.median(xs):6.3f}  mean {statistics.mean(xs):6.3f}  "
        f"p99 {percentile(xs, 0.99):7.3f}  max {max(xs):7.3f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=1500, help="timed submits per round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per mode, alternating")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        args.child.write_text(json.dumps(child(args.n)))
        return
    collected: dict[str, dict[str, list[float]]] = {
        mode: {"commit_ms": [], "submit_ms": [], "log_file_mb": []} for mode in MODES
    }
    order = list(MODES)
    for round_ in range(args.rounds):
        for mode in order if round_ % 2 == 0 else order[::-1]:
            figures = run_child(mode, args.n)
            collected[mode]["commit_ms"] += figures["commit_ms"]
            collected[mode]["submit_ms"] += figures["submit_ms"]
            collected[mode]["log_file_mb"].append(figures["log_file_mb"])
    cores = os.cpu_count()
    print(f"{args.rounds} rounds x {args.n} cached one-item submits per mode; {cores} cores")
    results: dict[str, Any] = {}
    for mode, figures in collected.items():
        print(f"\ncheckpoint by {mode} (VERIFIER_DATABASE__SQLITE_CHECKPOINT_S={MODES[mode]})")
        print(f"  commit : {summary(figures['commit_ms'])}")
        print(f"  submit : {summary(figures['submit_ms'])}")
        print(f"  log file reached {max(figures['log_file_mb']):.1f} MiB")
        results[mode] = (
            {key: round(statistics.median(figures[key]), 3) for key in ("commit_ms", "submit_ms")}
            | {
                f"{key}_p99": round(percentile(figures[key], 0.99), 3)
                for key in ("commit_ms", "submit_ms")
            }
            | {
                "commit_ms_mean": round(statistics.mean(figures["commit_ms"]), 3),
                "log_file_mb": round(max(figures["log_file_mb"]), 1),
            }
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
