"""The oracle tier's own rules, without a service: an oracle definition is refused with the
field that is wrong, a result is checked against the result schema field by field, a value maps
to a score as the definition says, and a policy step naming an oracle not defined is refused."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from tiers.base import VerdictStatus
from tiers.oracle import (
    OracleDefinition,
    OracleSettings,
    OracleTier,
    result_errors,
    result_verdict,
)
from verifier_service.oracle.access import period_start
from verifier_service.oracle.selection import _value

LAB = {
    "mode": "pull",
    "result_schema": {
        "ic50_nM": {"unit": "nM", "min": 0},
        "note": {"unit": "-", "required": False},
    },
    "score": {"field": "ic50_nM", "low": 10000, "high": 1},
    "price_per_item": 40,
}


def test_a_definition_says_what_is_wrong() -> None:
    with pytest.raises(ValidationError, match="push oracle needs url and secret"):
        OracleDefinition.model_validate({**LAB, "mode": "push"})
    with pytest.raises(ValidationError, match=r"score\.field 'pnl' is not in result_schema"):
        OracleDefinition.model_validate({**LAB, "score": {"field": "pnl", "low": 0, "high": 1}})
    with pytest.raises(ValidationError, match="low and high must differ"):
        OracleDefinition.model_validate({**LAB, "score": {"field": "ic50_nM", "low": 1, "high": 1}})


def test_results_are_checked_field_by_field() -> None:
    lab = OracleDefinition.model_validate(LAB)
    assert result_errors(lab, {"ic50_nM": 12.5}) == []
    errors = dict(result_errors(lab, {"ic50_nM": -3, "pnl": 1}))
    assert "below the schema's min 0" in errors["ic50_nM"]
    assert "not in the oracle's result schema" in errors["pnl"]
    assert "missing" in dict(result_errors(lab, {}))["ic50_nM"]
    for bad in ("12", True, float("nan"), None):
        assert "finite number (nM)" in dict(result_errors(lab, {"ic50_nM": bad}))["ic50_nM"]


def test_lower_is_better_maps_to_a_higher_score_and_values_become_components() -> None:
    lab = OracleDefinition.model_validate(LAB)
    strong = result_verdict("lab", lab, {"ic50_nM": 1.0})
    weak = result_verdict("lab", lab, {"ic50_nM": 50000.0})
    assert (strong.status, strong.score, weak.score) == (VerdictStatus.passed, 1.0, 0.0)
    assert strong.components == {"ic50_nM": 1.0, "cost_units": 40.0}
    assert "ic50_nM = 1 nM" in strong.feedback


def test_a_step_must_name_a_defined_oracle() -> None:
    tier = OracleTier(OracleSettings(definitions={"lab": OracleDefinition.model_validate(LAB)}))
    tier.validate_config({"oracle": "lab", "select_by": "uncertainty"})
    with pytest.raises(ValueError, match="no oracle 'market' in settings \\(known: lab\\)"):
        tier.validate_config({"oracle": "market"})
    with pytest.raises(ValueError, match="select_by"):
        tier.validate_config({"oracle": "lab", "select_by": "price"})


def test_capacity_periods_start_at_multiples_of_their_length() -> None:
    now = datetime(2026, 11, 29, 15, 30, tzinfo=UTC)
    assert period_start(now, 86400) == datetime(2026, 11, 29, tzinfo=UTC)
    assert period_start(now, 3600) == datetime(2026, 11, 29, 15, tzinfo=UTC)


def test_selection_values_an_item_by_what_the_step_says() -> None:
    records = [
        SimpleNamespace(score=0.4, uncertainty=None),  # chem.fast: no uncertainty
        SimpleNamespace(score=0.7, uncertainty=0.35),  # the surrogate
    ]
    assert _value(records, "best_lower_tier") == 0.7  # type: ignore[arg-type]
    assert _value(records, "uncertainty") == 0.35  # type: ignore[arg-type]
    assert _value([], "uncertainty") is None  # ranked last
