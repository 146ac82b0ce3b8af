"""bench/bench_judge.py in a small form: it runs end to end against the stub process, every item
is scored, and batching with requests in flight beats one call at a time by a wide margin (at
50 ms per answer and 32 in flight the bound is 32x; a loaded machine still shows several x)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_judge_bench_measures_batching_against_one_at_a_time(tmp_path: Path) -> None:
    out = tmp_path / "judge.json"
    args = ["--n", "96", "--n-one", "10", "--batch", "32", "--in-flight", "32", "--repeat", "1"]
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench_judge.py"), *args, "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["batched_over_one"] > 4, figures
    assert figures["one_at_a_time"]["items_per_s"] < 1 / 0.05  # each call waits 50 ms
    assert "batched / one at a time" in done.stdout
