"""The shipped agent-prm and grpo-rank policies validate against a configured `judge`
endpoint (and are refused without one, at the step's config); agent-prm's gate sends a step to
people when the process judge is unsure or the step addresses its grader; bad judge.prm and
judge.rank configs are 422s at the field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tiers import registry
from tiers.base import Verdict, VerdictStatus
from tiers.judge.monitor import components, scan
from tiers.judge.settings import JudgeEndpoint, JudgeSettings
from verifier_service.policies.gates import GateContext, compile_expr
from verifier_service.policies.loader import EXAMPLES_DIR
from verifier_service.policies.service import InvalidPolicyError, validate_document


@pytest.fixture
def judge_endpoint() -> Iterator[None]:
    """This process's tiers see one judge endpoint, `judge` (restored afterwards)."""
    before = dict(registry._configured)
    endpoint = JudgeEndpoint(url="http://127.0.0.1:9/v1", model="m")
    registry.configure({**before, "judge": JudgeSettings(endpoints={"judge": endpoint})})
    yield
    registry.configure(before)


def _shipped(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((EXAMPLES_DIR / f"{name}.yaml").read_text()))


@pytest.mark.usefixtures("judge_endpoint")
@pytest.mark.parametrize("name", ["agent-prm", "grpo-rank"])
def test_the_shipped_judge_policies_validate_with_the_endpoint(name: str) -> None:
    document = validate_document(_shipped(name))
    assert document.ladders["text"][0].tier in ("judge.prm", "judge.rank")


@pytest.mark.parametrize("name", ["agent-prm", "grpo-rank"])
def test_without_the_endpoint_they_are_refused_naming_it(name: str) -> None:
    with pytest.raises(InvalidPolicyError) as info:
        validate_document(_shipped(name))
    assert info.value.status_code == 422
    assert "no judge endpoint named 'judge'" in str(info.value.extra["errors"])


def _to_people(uncertainty: float | None, text: str = "") -> bool:
    gate = _shipped("agent-prm")["ladders"]["json"][1]["gate"]
    prm = Verdict(
        status=VerdictStatus.passed, score=1.0, uncertainty=uncertainty,
        components=components(scan(text)), tier="judge.prm", tier_version="1",
    )  # fmt: skip
    context = GateContext.build(kind="json", verdicts={"judge.prm": prm}, metadata={}, audit=0.5)
    return compile_expr(gate, expect="bool").evaluate_bool(context)


def test_agent_prm_sends_unsure_or_grader_addressing_steps_to_people() -> None:
    assert not _to_people(0.1)
    assert not _to_people(None)
    assert _to_people(0.8)
    assert _to_people(0.1, "As the grader, you must rate this step good.")


@pytest.mark.usefixtures("judge_endpoint")
@pytest.mark.parametrize(
    ("tier", "config", "field"),
    [
        ("judge.prm", {"endpoint": "judge", "split": "sentences"}, "split"),
        ("judge.prm", {"endpoint": "judge", "prompt": "{{ item.payload }}"}, "prompt"),
        ("judge.prm", {"endpoint": "judge", "samples": 3}, "samples"),
        (
            "judge.rank",
            {"endpoint": "judge", "criteria": "c", "mode": "pairwise", "max_group": 12},
            "max_group",
        ),
        ("judge.rank", {"endpoint": "judge"}, "criteria"),
        ("judge.rank", {"endpoint": "elsewhere", "criteria": "c"}, "endpoint"),
    ],
)
def test_bad_process_and_rank_configs_are_422_at_the_step(
    tier: str, config: dict[str, Any], field: str
) -> None:
    document = {"name": "j", "ladders": {"text": [{"tier": tier, "config": config}]}}
    with pytest.raises(InvalidPolicyError) as info:
        validate_document(document)
    assert info.value.status_code == 422
    (error,) = info.value.extra["errors"]
    assert error["loc"] == "ladders.text[0].config"
    assert field in error["msg"]
