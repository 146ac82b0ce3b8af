"""`verifier-service chem ...`: chemistry maintenance commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tiers.chem.surrogate_model import FeatureKind, SurrogateModelError, train_surrogate
from verifier_service.wiring import configure_tiers

chem_app = typer.Typer(help="Chemistry tiers: train the learned surrogate of chem.surrogate.")


@chem_app.callback()
def chem() -> None:
    """Chemistry tier commands."""
    # The chemistry code these commands run takes the service's chem settings (VERIFIER_CHEM__*).
    configure_tiers()


@chem_app.command("train-surrogate")
def train_surrogate_command(
    csv: Annotated[
        Path,
        typer.Option(exists=True, dir_okay=False, readable=True, help="CSV of SMILES,value rows."),
    ],
    out: Annotated[Path, typer.Option(help="Where to write the model (.joblib).")],
    features: Annotated[
        str, typer.Option(help="Featurisation: morgan (count fingerprint) or descriptors.")
    ] = "morgan",
    n_estimators: Annotated[int, typer.Option(min=1, help="Trees in the random forest.")] = 100,
    seed: Annotated[int, typer.Option(help="Random seed of the split and the forest.")] = 0,
) -> None:
    """Train the chem.surrogate model (random forest, ensemble-spread uncertainty) from a CSV."""
    if features not in ("morgan", "descriptors"):
        raise typer.BadParameter("must be 'morgan' or 'descriptors'", param_hint="--features")
    kind: FeatureKind = "morgan" if features == "morgan" else "descriptors"
    try:
        report = train_surrogate(csv, out, features=kind, n_estimators=n_estimators, seed=seed)
    except SurrogateModelError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from exc
    typer.echo(
        f"trained on {report.n_train} rows, tested on {report.n_test} "
        f"(skipped {report.n_skipped}): R2 {report.metrics['r2']:.3f}, "
        f"MAE {report.metrics['mae']:.4g}; saved {report.path}"
    )
    typer.echo(
        "use it: set VERIFIER_CHEM__SURROGATE_MODEL_PATH="
        f"{report.path.resolve()} for chem.surrogate workers"
    )
