"""The calibration's JSON: per audited gate, the cheap tier against the tier above."""

from __future__ import annotations

from fastapi import APIRouter

from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.console.calibration import service
from verifier_service.console.calibration.schemas import Calibration
from verifier_service.console.calibration.service import endpoint_models
from verifier_service.console.overview.schemas import Window
from verifier_service.console.params import ThresholdQuery, WindowQuery
from verifier_service.core.deps import SessionDep, SettingsDep

router = APIRouter(tags=["console"])


@router.get("/v1/console/calibration")
def get_calibration(
    session: SessionDep,
    settings: SettingsDep,
    _: OperatorPrincipal,
    window: WindowQuery = Window.day,
    threshold: ThresholdQuery = None,
) -> Calibration:
    """Per audited gate, and per model judge against people: Spearman, agreement, confusion."""
    return service.calibration(session, window, threshold, endpoint_models(settings))
