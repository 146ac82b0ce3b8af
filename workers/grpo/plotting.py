"""The reward curve: mean reward and validity per step, from the run's metrics JSONL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_metrics(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if "step" in r]


def _smooth(values: list[float], window: int) -> list[float]:
    out = []
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1) : i + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def plot_reward_curve(
    metrics: Path, out: Path, *, reward_key: str, validity_key: str, title: str
) -> Path:
    """Write a PNG of the mean reward and validity of generated molecules against the step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in read_metrics(metrics) if reward_key in r]
    steps = [int(r["step"]) for r in rows]
    rewards = [float(r[reward_key]) for r in rows]
    validity = [float(r.get(validity_key, float("nan"))) for r in rows]
    window = max(1, len(rows) // 20)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    ax.plot(steps, rewards, color="tab:blue", alpha=0.3, linewidth=1)
    ax.plot(steps, _smooth(rewards, window), color="tab:blue", label="mean reward")
    ax.plot(steps, validity, color="tab:green", alpha=0.3, linewidth=1)
    ax.plot(steps, _smooth(validity, window), color="tab:green", label="validity")
    ax.set_xlabel("GRPO step")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out
