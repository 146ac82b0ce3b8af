"""judge.llm steps in policies: checked when the policy is created (422 at the field)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tiers import registry
from tiers.judge.settings import JudgeEndpoint, JudgeSettings
from verifier_service.policies.loader import EXAMPLES_DIR
from verifier_service.policies.service import InvalidPolicyError, validate_document


@pytest.fixture
def judge_endpoint() -> Iterator[None]:
    """This process's tiers see one judge endpoint, `local` (restored afterwards)."""
    before = dict(registry._configured)
    endpoint = JudgeEndpoint(url="http://127.0.0.1:9/v1", model="m")
    registry.configure({**before, "judge": JudgeSettings(endpoints={"local": endpoint})})
    yield
    registry.configure(before)


def _policy(config: dict[str, Any]) -> dict[str, Any]:
    return {"name": "j", "ladders": {"text": [{"tier": "judge.llm", "config": config}]}}


RUBRIC = {"criteria": "Is it right?", "scale": {"min": 0, "max": 10}}


def _error(config: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(InvalidPolicyError) as info:
        validate_document(_policy(config))
    assert info.value.status_code == 422
    (error,) = info.value.extra["errors"]
    assert error["loc"] == "ladders.text[0].config"
    return dict(error)


@pytest.mark.usefixtures("judge_endpoint")
def test_a_valid_judge_step_validates() -> None:
    document = validate_document(_policy({"endpoint": "local", "rubric": RUBRIC}))
    assert document.ladders["text"][0].tier == "judge.llm"


@pytest.mark.usefixtures("judge_endpoint")
@pytest.mark.parametrize(
    ("field", "template", "message"),
    [
        ("prompt", "{{ candidate ", "does not compile"),
        ("prompt", "{{ os.environ }}", "unknown namespace 'os'"),
        ("system", "{{ item.payload }}", "reads `item` other than item.metadata"),
    ],
)
def test_a_bad_template_is_a_422_naming_the_field(field: str, template: str, message: str) -> None:
    error = _error({"endpoint": "local", "rubric": RUBRIC, field: template})
    assert f"\n{field}\n" in error["msg"]
    assert message in error["msg"]


@pytest.mark.usefixtures("judge_endpoint")
def test_an_unknown_endpoint_is_a_422_naming_the_known_ones() -> None:
    error = _error({"endpoint": "openai", "rubric": RUBRIC})
    assert error["msg"] == (
        "endpoint: no judge endpoint named 'openai' is configured (configured: local); the "
        "operator names endpoints in the judge settings"
    )


@pytest.mark.usefixtures("judge_endpoint")
@pytest.mark.parametrize(
    ("rubric", "message"),
    [
        ({"criteria": "c"}, "exactly one of `scale` and `labels`"),
        ({"criteria": "c", "scale": {"min": 5, "max": 1}}, "scale.max (1) must be above"),
        (
            {"criteria": "c", "labels": {"values": ["a", "b"], "passing": ["c"]}},
            "labels.passing names labels not in values: ['c']",
        ),
    ],
)
def test_a_bad_rubric_is_a_422(rubric: dict[str, Any], message: str) -> None:
    assert message in _error({"endpoint": "local", "rubric": rubric})["msg"]


def test_the_shipped_qa_judge_policy_is_refused_without_its_endpoint() -> None:
    # `dev` and `migrate` seed the shipped policies with a warning for those that fail this,
    # so a machine without judge endpoints starts all the same (docs/judges.md).
    before = dict(registry._configured)
    registry.configure({k: v for k, v in before.items() if k != "judge"})
    try:
        with pytest.raises(InvalidPolicyError) as info:
            validate_document((EXAMPLES_DIR / "qa-judge.yaml").read_text(), "yaml")
    finally:
        registry.configure(before)
    (error,) = info.value.extra["errors"]
    assert "no judge endpoint named 'judge' is configured (configured: none)" in error["msg"]


def test_the_shipped_qa_judge_policy_validates_with_its_endpoint() -> None:
    before = dict(registry._configured)
    endpoint = JudgeEndpoint(url="http://127.0.0.1:9/v1", model="m")
    registry.configure({**before, "judge": JudgeSettings(endpoints={"judge": endpoint})})
    try:
        document = validate_document((EXAMPLES_DIR / "qa-judge.yaml").read_text(), "yaml")
    finally:
        registry.configure(before)
    assert [s.tier for s in document.ladders["text"]] == ["answer", "judge.llm", "human"]
