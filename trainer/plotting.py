"""The reward curve: mean reward and validity per step, from the run's metrics JSONL.

When the run read the service's cost ledger, a second panel shows per step the share of items
that escalated, the fidelity mix, cache hits per item and the cost units charged.
"""

from __future__ import annotations

import json
import math
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


def _series(rows: list[dict[str, Any]], key: str) -> list[float]:
    return [float(r.get(key, float("nan"))) for r in rows]


def _line(ax: Any, steps: list[int], values: list[float], window: int, **style: Any) -> None:
    color = style.pop("color")
    ax.plot(steps, values, color=color, alpha=0.25, linewidth=1)
    ax.plot(steps, _smooth(values, window), color=color, **style)


def _ledger_panel(
    ax: Any, rows: list[dict[str, Any]], steps: list[int], window: int, ledger: str, fidelity: str
) -> None:
    # Cache hits over every tier verdict the step needed (calls + hits, all tiers).
    hits = []
    for r in rows:
        calls = sum(float(v) for k, v in r.items() if k.startswith(f"{ledger}calls/"))
        cached = float(r.get(f"{ledger}cache_hits", float("nan")))
        hits.append(cached / (calls + cached) if calls + cached else float("nan"))
    _line(
        ax,
        steps,
        _series(rows, f"{ledger}escalated_frac"),
        window,
        color="tab:red",
        label="escalated share (ledger)",
        linewidth=3,
    )
    _line(ax, steps, hits, window, color="tab:purple", label="cache hit share (ledger)")
    tiers = sorted({k[len(fidelity) :] for r in rows for k in r if k.startswith(fidelity)})
    colors = ["tab:gray", "tab:orange", "tab:brown", "tab:pink"]
    for tier, color in zip(tiers, colors, strict=False):
        _line(
            ax,
            steps,
            _series(rows, f"{fidelity}{tier}"),
            window,
            color=color,
            linestyle="--",
            label=f"fidelity {tier}",
        )
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("share")
    ax.set_xlabel("GRPO step")
    ax.grid(alpha=0.3)
    cost_ax = ax.twinx()
    _line(
        cost_ax,
        steps,
        _series(rows, f"{ledger}cost_units"),
        window,
        color="black",
        linestyle=":",
        label="cost units / step (ledger)",
    )
    cost_ax.set_ylabel("cost units per step")
    cost_ax.set_ylim(bottom=0)
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = cost_ax.get_legend_handles_labels()
    # The faint raw lines carry no label: keep only the labelled, smoothed ones.
    pairs = [
        (h, lab)
        for h, lab in zip(handles + more, labels + more_labels, strict=True)
        if not lab.startswith("_")
    ]
    ax.legend(
        [h for h, _ in pairs],
        [lab for _, lab in pairs],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.14),
        ncol=3,
        fontsize=7,
    )


def _revisions_panel(ax: Any, rows: list[dict[str, Any]], steps: list[int], ledger: str) -> None:
    """Running totals: what the lab was paid (ledger) and how many earlier rewards its results
    revised (changes feed): the second follows the first by the lab's turnaround."""
    paid = _cumulative(_series(rows, f"{ledger}cost_units/oracle"))
    revised = _cumulative(_series(rows, "revisions/revised"))
    ax.plot(steps, paid, color="tab:purple", linewidth=2, label="lab cost units (ledger)")
    ax.set_ylabel("cost units, running total")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("GRPO step")
    ax.grid(alpha=0.3)
    count_ax = ax.twinx()
    count_ax.plot(steps, revised, color="tab:orange", linewidth=2, linestyle="--",
                  label="earlier rewards revised by lab results (changes feed)")  # fmt: skip
    count_ax.set_ylabel("rewards revised, running total")
    count_ax.set_ylim(bottom=0)
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = count_ax.get_legend_handles_labels()
    ax.legend(handles + more, labels + more_labels, loc="upper center",
              bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=7)  # fmt: skip


def _cumulative(values: list[float]) -> list[float]:
    total, out = 0.0, []
    for value in values:
        total += 0.0 if math.isnan(value) else value
        out.append(total)
    return out


def plot_reward_curve(
    metrics: Path,
    out: Path,
    *,
    reward_key: str,
    validity_key: str,
    title: str,
    validity_label: str = "validity",
    eval_key: str | None = None,
    ledger_prefix: str | None = None,
    fidelity_prefix: str | None = None,
) -> Path:
    """Write a PNG of the mean reward and validity of generated molecules against the step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in read_metrics(metrics) if reward_key in r]
    steps = [int(r["step"]) for r in rows]
    window = max(1, len(rows) // 20)
    ledger = ledger_prefix is not None and any(f"{ledger_prefix}items" in r for r in rows)
    revisions = ledger and any("revisions/revised" in r for r in rows)
    panels = 1 + int(ledger) + int(revisions)
    fig, axes = plt.subplots(
        panels,
        1,
        figsize=(8, 4.5 + 3.0 * (panels - 1)),
        dpi=110,
        sharex=True,
        squeeze=False,
    )
    ax = axes[0][0]
    _line(
        ax,
        steps,
        _series(rows, reward_key),
        window,
        color="tab:blue",
        label="mean reward",
        linewidth=2.5,
    )
    # Dashed and thinner: where the check equals the reward, the reward's line stays visible.
    _line(
        ax,
        steps,
        _series(rows, validity_key),
        window,
        color="tab:green",
        label=validity_label,
        linestyle="--",
        linewidth=1.2,
    )
    if eval_key is not None:
        # Measured only before and after GRPO: markers, no line that would suggest a path.
        evals = [r for r in read_metrics(metrics) if eval_key in r]
        for i, r in enumerate(evals):
            step, value = int(r["step"]), float(r[eval_key])
            label = "held-out accuracy (greedy)" if i == 0 else None
            ax.plot([step], [value], "D", color="tab:red", markersize=8, label=label)
            ax.annotate(f"{value:.2f}", (step, value), textcoords="offset points", xytext=(8, 4))
    ax.set_xlabel("GRPO step")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left" if eval_key is not None else "lower right")
    if ledger and ledger_prefix is not None and fidelity_prefix is not None:
        _ledger_panel(axes[1][0], rows, steps, window, ledger_prefix, fidelity_prefix)
    if revisions and ledger_prefix is not None:
        _revisions_panel(axes[2][0], rows, steps, ledger_prefix)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, bbox_inches="tight")
    plt.close(fig)
    return out
