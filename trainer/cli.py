"""`verifier-trainer --config FILE`: the companion GRPO trainer, a client program of the service.

Its own command (installed with `pip install 'verifier-service[train]'`, no server parts); the
server's CLI mounts it too, as `verifier-service train`. Nothing here imports torch until a run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def train(
    config: Annotated[
        Path, typer.Option("--config", "-c", exists=True, dir_okay=False, help="Run YAML.")
    ],
    base_url: Annotated[
        str | None, typer.Option(help="Service URL (overrides service.base_url).")
    ] = None,
    output_dir: Annotated[
        Path | None, typer.Option(help="Output folder (overrides output_dir).")
    ] = None,
    max_steps: Annotated[int | None, typer.Option(help="Overrides grpo.max_steps.")] = None,
) -> None:
    """GRPO with TRL's GRPOTrainer, rewarded by this service (needs the `train` extra)."""
    from trainer.config import TrainConfig

    run_config = TrainConfig.load(config)
    if base_url is not None:
        run_config.service.base_url = base_url
    if output_dir is not None:
        run_config.output_dir = output_dir
    if max_steps is not None:
        run_config.grpo.max_steps = max_steps
    try:
        from trainer.trainer import run
    except ImportError as exc:
        typer.echo(f"error: {exc}; install the train extra: pip install 'verifier-service[train]'")
        raise typer.Exit(2) from None
    summary = run(run_config)
    if run_config.task == "arithmetic":
        typer.echo(
            f"steps {summary.steps}: mean reward {summary.start_reward:.3f} -> "
            f"{summary.end_reward:.3f}, exact \\boxed{{sum}} {summary.start_validity:.2f} -> "
            f"{summary.end_validity:.2f}; held-out sums (greedy) {summary.warm_validity:.2f} -> "
            f"{summary.end_eval:.2f}\nmetrics: {summary.metrics}\nplot: {summary.plot}\n"
            f"model: {summary.model_dir}"
        )
        return
    typer.echo(
        f"steps {summary.steps}: mean reward {summary.start_reward:.3f} -> "
        f"{summary.end_reward:.3f}, validity {summary.start_validity:.2f} -> "
        f"{summary.end_validity:.2f} (warm start sampled: {summary.warm_validity:.2f})\n"
        f"metrics: {summary.metrics}\nplot: {summary.plot}\n"
        f"model: {summary.model_dir}"
    )


def main() -> None:
    """The `verifier-trainer` command."""
    typer.run(train)
