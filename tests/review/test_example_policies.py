"""The example policies that send items to people validate against the real tiers."""

from __future__ import annotations

import pytest

from verifier_service.policies.loader import EXAMPLES_DIR
from verifier_service.policies.service import InvalidPolicyError, validate_document


@pytest.mark.parametrize("name", ["tool-call-audit", "drug-likeness-review"])
def test_example_policy_with_a_human_step_validates(name: str) -> None:
    document = validate_document((EXAMPLES_DIR / f"{name}.yaml").read_text(), "yaml")
    (kind,) = document.ladders
    human = document.ladders[kind][-1]
    assert human.tier == "human"
    assert human.config["rubric"]["dimensions"]


def test_a_label_rubric_needs_two_labels() -> None:
    source = (EXAMPLES_DIR / "tool-call-audit.yaml").read_text()
    with pytest.raises(InvalidPolicyError) as err:
        validate_document(source.replace('labels: ["no", "yes"]', 'labels: ["no"]'), "yaml")
    (error,) = err.value.extra["errors"]
    assert error["loc"] == "ladders.json[1].config"
    assert "rubric.dimensions.1" in error["msg"]
    assert "needs >= 2 labels" in error["msg"]
