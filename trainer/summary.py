"""A run's metrics JSONL as a Markdown table: per block of steps, the mean of each figure.

python -m trainer.summary runs/grpo-ladder/metrics.jsonl --block 50
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from trainer.plotting import read_metrics

REWARD = "rewards/verifier/mean"
VALIDITY = "rewards/molecule_validity/mean"
LEDGER = "verifier/ledger/"
FIDELITY = "verifier/fidelity/"

#: (column heading, metrics key, digits)
COLUMNS: list[tuple[str, str, int]] = [
    ("mean reward", REWARD, 3),
    ("validity", VALIDITY, 2),
    ("escalated share", f"{LEDGER}escalated_frac", 3),
    ("cost units / step", f"{LEDGER}cost_units", 3),
    ("cache hits / step", f"{LEDGER}cache_hits", 1),
    ("fidelity chem.surrogate", f"{FIDELITY}chem.surrogate", 3),
    ("fidelity chem.fast", f"{FIDELITY}chem.fast", 3),
    ("fidelity oracle", f"{FIDELITY}oracle", 3),
    ("items at the lab step", f"{LEDGER}calls/oracle", 2),
    ("rewards revised / step", "revisions/revised", 2),
    ("mean change of a revised reward", "revisions/delta_mean", 3),
    ("KL", "kl", 4),
]


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    values = [float(r[key]) for r in rows if key in r and not math.isnan(float(r[key]))]
    return sum(values) / len(values) if values else float("nan")


def block_table(rows: list[dict[str, Any]], block: int) -> str:
    """Markdown: one line per `block` steps with the minutes at its end and each column's mean."""
    steps = [r for r in rows if REWARD in r]
    columns = [c for c in COLUMNS if any(c[1] in r for r in steps)]
    head = ["steps", "minutes at end", *[c[0] for c in columns]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for start in range(0, len(steps), block):
        chunk = steps[start : start + block]
        cells = [
            f"{chunk[0]['step']}-{chunk[-1]['step']}",
            f"{float(chunk[-1]['elapsed_s']) / 60:.1f}",
            *[f"{_mean(chunk, key):.{digits}f}" for _, key, digits in columns],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("metrics", type=Path)
    parser.add_argument("--block", type=int, default=50, help="Steps per line.")
    args = parser.parse_args()
    rows = read_metrics(args.metrics)
    for row in rows:
        if "warm_start/valid" in row:
            print(
                f"warm start: {row['warm_start/valid']:.3f} valid, "
                f"{row.get('warm_start/unique_valid', float('nan')):.3f} distinct valid, "
                f"of {int(row.get('warm_start/samples', 0))} samples\n"
            )
    print(block_table(rows, args.block))


if __name__ == "__main__":
    main()
