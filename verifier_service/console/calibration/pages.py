"""The calibration page: per audited gate, the cheap tier against the tier above.

Server-rendered, charts included (SVG drawn here from the same JSON the API returns): it needs
no script and reads the same with the keyboard as with the mouse.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.console.calibration import service
from verifier_service.console.calibration.schemas import GateCalibration
from verifier_service.console.calibration.service import endpoint_models
from verifier_service.console.overview.schemas import Window
from verifier_service.console.params import ThresholdQuery, WindowQuery
from verifier_service.console.render import renderer
from verifier_service.core.deps import SessionDep, SettingsDep

router = APIRouter(tags=["console pages"], include_in_schema=False)

WIDTH, HEIGHT, PAD = 360, 260, 34
#: The correlation-over-time chart: wide and low.
LINE_WIDTH, LINE_HEIGHT = 720, 150


@dataclass(frozen=True)
class Dot:
    """One audited item on the scatter chart."""

    x: float
    y: float
    passed: bool
    label: str


@dataclass(frozen=True)
class Chart:
    """A gate's charts in SVG coordinates: the scatter and the correlation over time."""

    dots: list[Dot]
    cut_x: float | None  # where the gate's threshold is on the cheap axis
    cut_y: float  # where the upper threshold is
    line: str  # polyline points of Spearman per bucket
    line_dots: list[tuple[float, float, str]]
    x_label: str
    y_label: str


def _scale(value: float, low: float, high: float, start: float, end: float) -> float:
    span = (high - low) or 1.0
    return round(start + (min(max(value, low), high) - low) / span * (end - start), 1)


def chart(gate: GateCalibration) -> Chart:
    """Where a gate's points and lines go on its two charts."""
    cheap = [p.cheap for p in gate.points]
    low, high = min([*cheap, 0.0, gate.threshold]), max([*cheap, 1.0, gate.threshold])
    left, right, top, bottom = PAD, WIDTH - 8, 22, HEIGHT - PAD
    dots = [
        Dot(
            x=_scale(p.cheap, low, high, left, right),
            y=_scale(p.upper, 0.0, 1.0, bottom, top),
            passed=p.passed,
            label=f"{gate.cheap_tier} {p.cheap:.3f}, {gate.upper_tier} {p.upper:.3f}",
        )
        for p in gate.points
    ]
    reading = service.read_gate(gate.gate, gate.cheap_tier)
    cut_x = _scale(reading.threshold, low, high, left, right) if reading.threshold else None
    n = len(gate.buckets)
    line_dots = [
        (
            _scale(i, 0, max(n - 1, 1), PAD, LINE_WIDTH - 8),
            _scale(b.spearman, -1.0, 1.0, LINE_HEIGHT - 10, 10),
            f"{b.start:%d %b %H:%M}: rho {b.spearman:.2f} over {b.pairs}",
        )
        for i, b in enumerate(gate.buckets)
        if b.spearman is not None
    ]
    return Chart(
        dots=dots, cut_x=cut_x, cut_y=_scale(gate.threshold, 0.0, 1.0, bottom, top),
        line=" ".join(f"{x},{y}" for x, y, _ in line_dots), line_dots=line_dots,
        x_label=f"{gate.cheap_tier} {gate.cheap_value}", y_label=f"{gate.upper_tier} score",
    )  # fmt: skip


@router.get("/console/calibration")
def calibration_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    window: WindowQuery = Window.day,
    threshold: ThresholdQuery = None,
) -> HTMLResponse:
    """Calibration: how each audited gate's cheap tier agrees with the tier above it."""
    found = service.calibration(session, window, threshold, endpoint_models(settings))
    return renderer.page(
        request, settings, "calibration.html", principal=principal, calibration=found,
        charts=[chart(g) for g in found.gates], windows=[w.value for w in Window],
        window=window.value, width=WIDTH, height=HEIGHT, pad=PAD, line_width=LINE_WIDTH,
        line_height=LINE_HEIGHT,
    )  # fmt: skip
