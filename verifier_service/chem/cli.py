"""`verifier-service chem ...`: chemistry maintenance commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tiers.chem.surrogate_model import (
    CALIBRATION_FOLDS,
    COVERAGE_TARGET,
    FeatureKind,
    SurrogateModelError,
    train_surrogate,
)
from verifier_service.core.db import transaction
from verifier_service.oracle.calibration import Calibration, RetrainReport, lab_results, retrain
from verifier_service.settings import get_settings
from verifier_service.wiring import configure_tiers

chem_app = typer.Typer(help="Chemistry tiers: train the learned surrogate of chem.surrogate.")


@chem_app.callback()
def chem() -> None:
    """Chemistry tier commands."""
    # The chemistry code these commands run takes the service's chem settings (VERIFIER_CHEM__*).
    configure_tiers()


@chem_app.command("train-surrogate")
def train_surrogate_command(
    out: Annotated[Path, typer.Option(help="Where to write the model (.joblib).")],
    csv: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            dir_okay=False,
            readable=True,
            help="CSV of SMILES,value rows (with --from-oracle: merged into the training set).",
        ),
    ] = None,
    from_oracle: Annotated[
        str | None,
        typer.Option(help="Train on the values this oracle measured for molecule items."),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(help="With --from-oracle: the result field to learn, e.g. logp."),
    ] = None,
    old_model: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            dir_okay=False,
            help="With --from-oracle: the model to compare with "
            "(default: VERIFIER_CHEM__SURROGATE_MODEL_PATH, when set).",
        ),
    ] = None,
    held_out: Annotated[
        float,
        typer.Option(min=0.05, max=0.5, help="With --from-oracle: fraction of results held out."),
    ] = 0.2,
    features: Annotated[
        str, typer.Option(help="Featurisation: morgan (count fingerprint) or descriptors.")
    ] = "morgan",
    n_estimators: Annotated[int, typer.Option(min=1, help="Trees in the random forest.")] = 100,
    seed: Annotated[int, typer.Option(help="Random seed of the split and the forest.")] = 0,
) -> None:
    """Train the chem.surrogate model (random forest, ensemble-spread uncertainty) from a CSV,
    or from an oracle's results (--from-oracle, --target), showing the calibration of the model
    in use and of the new one on held-out results."""
    if features not in ("morgan", "descriptors"):
        raise typer.BadParameter("must be 'morgan' or 'descriptors'", param_hint="--features")
    kind: FeatureKind = "morgan" if features == "morgan" else "descriptors"
    if from_oracle is not None:
        if not target:
            raise typer.BadParameter("name the result field to learn", param_hint="--target")
        old = old_model or get_settings().chem.surrogate_model_path
        with transaction() as session:
            lab = lab_results(session, from_oracle, target)
        try:
            retrained = retrain(
                lab, out, old_model=old, base_csv=csv, features=kind,
                n_estimators=n_estimators, held_out_fraction=held_out, seed=seed,
            )  # fmt: skip
        except SurrogateModelError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(code=1) from exc
        _print_retrained(retrained)
    else:
        if csv is None:
            raise typer.BadParameter("give --csv or --from-oracle", param_hint="--csv")
        try:
            report = train_surrogate(csv, out, features=kind, n_estimators=n_estimators, seed=seed)
        except SurrogateModelError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(code=1) from exc
        m = report.metrics
        typer.echo(
            f"trained on {report.n_train} rows, tested on {report.n_test} "
            f"(skipped {report.n_skipped}): R2 {m['r2']:.3f}, "
            f"MAE {m['mae']:.4g}; saved {report.path}"
        )
        if "coverage_2std" in m:
            typer.echo(
                f"uncertainty on the {report.n_test} test rows, raw tree spread -> calibrated: "
                f"coverage(2std) {m['coverage_2std_raw']:.3f} -> {m['coverage_2std']:.3f}, "
                f"mean std {m['mean_std_raw']:.4g} -> {m['mean_std']:.4g}"
            )
            typer.echo(_scale_note(report.uncertainty_scale))
    typer.echo(
        "use it: set VERIFIER_CHEM__SURROGATE_MODEL_PATH="
        f"{out.resolve()} for chem.surrogate workers"
    )


def _scale_note(scale: float) -> str:
    return (
        f"the saved model's std is the trees' spread x {scale:.3f} (calibrated by "
        f"{CALIBRATION_FOLDS}-fold cross-validation on its training rows so that "
        f"{COVERAGE_TARGET:.0%} of errors fall within 2 std)"
    )


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _row(c: Calibration, path: Path | None) -> str:
    return (
        f"{c.label:<7} {c.n:>4} {c.mae:>8.3f} {_number(c.spearman):>9} "
        f"{_number(c.coverage):>14} {_number(c.mean_std):>9}  {path}"
    )


def _print_retrained(r: RetrainReport) -> None:
    base = f" + {r.n_train_base} rows of the CSV" if r.n_train_base else ""
    typer.echo(
        f"oracle {r.lab.oracle}, field {r.lab.field}: {len(r.lab.results)} measured molecules "
        f"({r.lab.skipped} results skipped); trained on {r.n_train_lab}{base}, "
        f"held out {r.n_held_out}"
    )
    typer.echo("calibration on the held-out lab results:")
    typer.echo("model      n      MAE  Spearman  coverage(2std)  mean std  file")
    if r.before is None:
        typer.echo("before     (no model configured: set VERIFIER_CHEM__SURROGATE_MODEL_PATH)")
    else:
        typer.echo(_row(r.before, r.old_model))
    typer.echo(_row(r.after, r.path))
    raw, after = r.after_raw, r.after
    if raw.coverage is not None and after.coverage is not None:
        typer.echo(
            f"uncertainty on the same {after.n} held-out results, raw tree spread -> calibrated: "
            f"coverage(2std) {raw.coverage:.3f} -> {after.coverage:.3f}, "
            f"mean std {_number(raw.mean_std)} -> {_number(after.mean_std)}"
        )
        typer.echo(_scale_note(r.uncertainty_scale))
    typer.echo(
        f"saved {r.path} (refitted on all {r.n_train_lab + r.n_held_out} lab results{base}; "
        "'after' is the same recipe fitted without the held-out ones)"
    )
