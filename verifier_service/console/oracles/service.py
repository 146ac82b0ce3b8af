"""What the console's oracle pages show: the oracle domain's own figures (the ones
GET /v1/oracles answers), its batches with what each still waits for, its latest results, and
the configured learned surrogate scored against those results (`surrogate_check`: computed with
`oracle.calibration.calibrate` once per state of the results and the model file, then cached)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from tiers.chem.surrogate_model import SurrogateModel, SurrogateModelError
from tiers.oracle import OracleDefinition
from verifier_service.console.oracles import repository as console_repository
from verifier_service.core.db import utcnow
from verifier_service.oracle import repository, service, views
from verifier_service.oracle.calibration import Calibration, LabResults, calibrate, lab_results
from verifier_service.oracle.schemas import OracleOut

#: Batches whose results are still missing.
OPEN_STATES = ("sending", "sent", "open", "leased")
BATCHES_SHOWN = 30
RESULTS_SHOWN = 30


@dataclass(frozen=True)
class BatchRow:
    """One batch as the page lists it."""

    id: str
    mode: str
    state: str
    created_at: datetime
    due_at: datetime
    overdue: bool
    items: int
    with_result: int
    attempts: int
    claims: int
    resendable: bool


@dataclass(frozen=True)
class ResultRow:
    """One result the oracle sent back."""

    item_id: str
    batch_id: str | None
    job_id: str
    answered_at: datetime
    turnaround_s: float | None
    values: dict[str, Any] | None
    error: str | None


@dataclass(frozen=True)
class OraclePage:
    """Everything the page of one oracle shows."""

    figures: OracleOut
    definition: OracleDefinition
    period_start: datetime
    period_end: datetime
    changed_by: str | None
    changed_at: datetime | None
    batches: list[BatchRow]
    results: list[ResultRow]


def resendable(mode: str, state: str) -> bool:
    """What `service.resend` takes: a pushed batch the partner took, a pull batch not done."""
    return (mode == "push" and state == "sent") or (mode == "pull" and state in ("open", "leased"))


def oracles(session: Session) -> list[OracleOut]:
    """Every oracle defined, with its figures."""
    return views.overview(session)


def oracle_page(session: Session, name: str) -> OraclePage:
    """One oracle's page (UnknownOracleError, a 404, for a name not defined)."""
    found = service.definition(name)
    figures = next(o for o in views.overview(session) if o.name == name)
    now = utcnow()
    start = service.period_start(now, found.period_s)
    batches = repository.batches(session, name, limit=BATCHES_SHOWN)
    states = console_repository.batch_item_states(session, [b.id for b in batches])
    rows = [
        BatchRow(
            id=b.id, mode=b.mode, state=b.state, created_at=b.created_at, due_at=b.due_at,
            overdue=b.state in OPEN_STATES and b.due_at < now,
            items=sum(states.get(b.id, {}).values()),
            with_result=sum(n for s, n in states.get(b.id, {}).items() if s != "batched"),
            attempts=b.attempts, claims=b.claims, resendable=resendable(b.mode, b.state),
        )
        for b in batches
    ]  # fmt: skip
    results = [
        ResultRow(
            item_id=r.id, batch_id=r.batch_id, job_id=r.job_id, answered_at=r.answered_at,
            turnaround_s=(r.answered_at - r.selected_at).total_seconds()
            if r.selected_at is not None else None,
            values=(r.result or {}).get("values"), error=(r.result or {}).get("error"),
        )
        for r in console_repository.latest_results(session, name, RESULTS_SHOWN)
        if r.answered_at is not None
    ]  # fmt: skip
    control = console_repository.control(session, name)
    return OraclePage(
        figures=figures, definition=found, period_start=start,
        period_end=start + timedelta(seconds=found.period_s),
        changed_by=control.changed_by if control else None,
        changed_at=control.changed_at if control else None,
        batches=rows, results=results,
    )  # fmt: skip


#: The latest results scored: the page stays quick whatever the oracle's history.
RESULTS_SCORED = 500
ML_EXTRA = "pip install 'verifier-service[ml]'"


@dataclass(frozen=True)
class SurrogateCheck:
    """What the section shows: the field, the model, the results used and the figures, or why
    there are none (`problem`)."""

    field: str
    fields: list[str]
    unit: str | None
    model_path: Path | None
    model_target: str | None
    results: int
    skipped: int
    calibration: Calibration | None
    problem: str | None
    #: When these figures were computed (a later view may show them from the cache).
    computed_at: datetime | None = None


#: Checks kept per API process (oracle x field x model x results state), and how long at most.
CHECKS_CACHED = 32
CHECK_TTL_S = 600.0
_CheckKey = tuple[Any, ...]
_checks: OrderedDict[_CheckKey, tuple[float, SurrogateCheck]] = OrderedDict()
_checks_lock = threading.Lock()


def _model_mark(model_path: Path | None) -> tuple[int, int] | None:
    """The model file's mtime and size (None: no model, or no file there)."""
    if model_path is None:
        return None
    try:
        found = model_path.stat()
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size


def clear_surrogate_checks() -> None:
    """Forget every cached check (tests; a process that wants fresh figures)."""
    with _checks_lock:
        _checks.clear()


def surrogate_check(
    session: Session,
    name: str,
    definition: OracleDefinition,
    model_path: Path | None,
    field: str | None = None,
) -> SurrogateCheck:
    """The configured surrogate against `name`'s latest molecule results for `field` (default:
    the field the oracle scores), computed once and then served from an in-process cache.

    Scoring runs up to RESULTS_SCORED model predictions (and reads and parses as many results),
    too much for every view of a page an operator reloads. The cache is keyed by what the
    figures depend on: the oracle, the field, the model file's path, mtime and size, and the
    count and latest time of the oracle's molecule results (one small aggregate query per
    view). So the page needs no "Score now" button and never shows figures older than the data:
    a new result or a retrained model file makes the next view compute afresh, which is what an
    operator who just posted results or retrained expects to see. The page says when the
    figures were computed. Entries are bounded (CHECKS_CACHED, least recently used out) and
    expire after CHECK_TTL_S, in case something the key cannot see changed (a file replaced
    within its mtime's resolution with the same size)."""
    chosen = field or definition.score.field
    mark = console_repository.molecule_results_mark(session, name)
    key = (name, chosen, str(model_path), _model_mark(model_path), *mark)
    now = time.monotonic()
    with _checks_lock:
        hit = _checks.get(key)
        if hit is not None and now - hit[0] < CHECK_TTL_S:
            _checks.move_to_end(key)
            return hit[1]
    found = replace(
        _surrogate_check(session, name, definition, model_path, chosen), computed_at=utcnow()
    )
    with _checks_lock:
        _checks[key] = (now, found)
        _checks.move_to_end(key)
        while len(_checks) > CHECKS_CACHED:
            _checks.popitem(last=False)
    return found


def _surrogate_check(
    session: Session,
    name: str,
    definition: OracleDefinition,
    model_path: Path | None,
    chosen: str,
) -> SurrogateCheck:
    """The check itself, uncached: `surrogate_check`'s figures for the field `chosen`."""
    fields = list(definition.result_schema)
    spec = definition.result_schema.get(chosen)

    def check(
        problem: str | None,
        *,
        lab: LabResults | None = None,
        target: str | None = None,
        calibration: Calibration | None = None,
    ) -> SurrogateCheck:
        return SurrogateCheck(
            field=chosen, fields=fields, unit=spec.unit if spec else None, model_path=model_path,
            model_target=target, results=len(lab.results) if lab else 0,
            skipped=lab.skipped if lab else 0, calibration=calibration,
            problem=problem,
        )  # fmt: skip

    if spec is None:
        return check(f"Oracle {name} has no result field {chosen!r}; its fields: "
                     f"{', '.join(fields)}.")  # fmt: skip
    lab = lab_results(session, name, chosen, latest=RESULTS_SCORED)
    if model_path is None:
        return check(
            "No surrogate model is configured (settings chem.surrogate_model_path, env "
            "VERIFIER_CHEM__SURROGATE_MODEL_PATH). Train one from these results with "
            f"verifier-service chem train-surrogate --from-oracle {name} --target {chosen} "
            "--out PATH, and point the setting at it.",
            lab=lab,
        )
    try:
        import joblib  # noqa: F401  (the model file is a joblib dump of a scikit-learn model)
        import sklearn  # noqa: F401
    except ImportError as exc:
        return check(
            f"Scoring the surrogate needs scikit-learn and joblib, the 'ml' extra ({exc}): "
            f"install it with {ML_EXTRA}.",
            lab=lab,
        )
    try:
        model = SurrogateModel.load(model_path)
    except SurrogateModelError as exc:
        return check(f"The configured model cannot be used: {exc}", lab=lab)
    if not lab.results:
        return check(
            f"No molecule result of oracle {name} carries a number for {chosen} yet.",
            target=model.target, lab=lab,
        )  # fmt: skip
    try:
        found = calibrate(model, lab.results, "configured")
    except Exception as exc:  # a model that does not fit its own features, say
        return check(
            f"The model's prediction failed: {type(exc).__name__}: {exc}",
            target=model.target, lab=lab,
        )  # fmt: skip
    return check(None, target=model.target, calibration=found, lab=lab)


def duration(seconds: float | None) -> str:
    """A duration as a person reads it: 0.8 s, 12 s, 4.5 min, 3.2 h, 2.5 d."""
    if seconds is None:
        return "\u2013"  # an en dash, as the other console pages show nothing
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
