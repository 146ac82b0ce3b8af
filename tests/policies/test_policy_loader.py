"""Parsing policy documents: examples load, mistakes come back pointing at the field."""

from __future__ import annotations

import json

import pytest

from verifier_service.policies.loader import (
    EXAMPLES_DIR,
    PolicyValidationError,
    example_policy_paths,
    load_policy_file,
    parse_policy,
)
from verifier_service.policies.schemas import PolicyDocument, PolicyKindError

KNOWN_TIERS = {
    "schema", "chem.fast", "chem.surrogate", "chem.dft", "code.sandbox", "human",
    "answer", "format", "similarity", "judge.llm", "judge.prm", "judge.rank",
}  # fmt: skip


def _errors(text: str, **kwargs: object) -> dict[str, str]:
    with pytest.raises(PolicyValidationError) as info:
        parse_policy(text, known_tiers=KNOWN_TIERS, **kwargs)  # type: ignore[arg-type]
    return {e["loc"]: e["msg"] for e in info.value.errors}


def _ladder(*steps: str) -> str:
    return "name: t\nladders:\n  molecule:\n" + "".join(steps)


def test_every_example_policy_loads_with_the_known_tiers() -> None:
    paths = example_policy_paths()
    assert {p.name for p in paths} >= {"default.yaml"}
    for path in paths:
        doc = load_policy_file(path, known_tiers=KNOWN_TIERS)
        assert doc.name == path.stem
        for kind in doc.ladders:
            assert doc.ladder_for(kind)
            doc.reward_for(kind)


def test_default_policy_shape() -> None:
    doc = load_policy_file(EXAMPLES_DIR / "default.yaml", known_tiers=KNOWN_TIERS)
    assert [s.tier for s in doc.ladder_for("molecule")] == ["chem.fast"]
    assert [s.tier for s in doc.ladder_for("json")] == ["schema"]
    assert doc.reward_for("molecule").components[0].component == "qed"
    with pytest.raises(PolicyKindError, match="no ladder for kind 'text'"):
        doc.ladder_for("text")


def test_json_and_mapping_inputs_parse_the_same() -> None:
    data = {"name": "j", "ladders": {"json": [{"tier": "schema"}]}}
    assert parse_policy(json.dumps(data), fmt="json") == parse_policy(data)
    assert parse_policy(json.dumps(data)).ladders["json"][0].tier == "schema"


def test_model_validate_checks_tiers_only_when_known_tiers_given() -> None:
    data = {"name": "j", "ladders": {"json": [{"tier": "nope"}]}}
    assert PolicyDocument.model_validate(data).ladders["json"][0].tier == "nope"
    with pytest.raises(ValueError, match="unknown tier 'nope'"):
        PolicyDocument.model_validate(data, context={"known_tiers": KNOWN_TIERS})


def test_yaml_syntax_error_has_line_info() -> None:
    errors = _errors("name: x\nladders:\n  molecule: [\n")
    assert "invalid YAML at line" in errors[""]


def test_unknown_tier_suggests_the_close_one() -> None:
    errors = _errors(_ladder("    - tier: chem.fats\n"))
    assert (
        errors["ladders.molecule[0].tier"] == "unknown tier 'chem.fats' (did you mean 'chem.fast'?)"
    )


def test_unknown_field_and_bad_value_point_at_the_field() -> None:
    errors = _errors(
        _ladder("    - tier: chem.fast\n      gaet: 'true'\n      audit_fraction: 2\n")
    )
    assert "unknown field" in errors["ladders.molecule[0].gaet"]
    assert "less than or equal to 1" in errors["ladders.molecule[0].audit_fraction"]


def test_empty_ladder_is_rejected() -> None:
    errors = _errors("name: t\nladders:\n  text: []\n")
    assert "ladders.text" in errors
