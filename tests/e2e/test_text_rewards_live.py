"""Text rewards end to end: the shipped math, gsm8k and qa policies through the live service
(API, a Celery worker on tier.fast, PostgreSQL, Redis), in both lanes: a small waiting request
runs the answer tier in the API process (inline lane), a larger one through the worker."""

from __future__ import annotations

import time
from typing import Any

from support import Service, poll_job

README_ITEM = {
    "kind": "text",
    "payload": {"text": "... \\boxed{3/4}"},
    "reference": {"answer": "0.75"},
}


def _text(text: str, answer: Any) -> dict[str, Any]:
    return {"kind": "text", "payload": {"text": text}, "reference": {"answer": answer}}


def _post(
    service: Service, policy: str, items: list[dict[str, Any]], wait_s: float = 90
) -> list[dict[str, Any]]:
    """The items of the job, once it completed or `wait_s` ran out."""
    with service.client(timeout=120) as client:
        body = {"policy": policy, "items": items, "wait_s": wait_s}
        response = client.post("/v1/rewards", json=body)
        assert response.status_code in (200, 202), response.text
        if response.status_code == 202:
            return list(poll_job(client, response.headers["location"], timeout=wait_s)["items"])
    return list(response.json()["items"])


def _verdict(item: dict[str, Any], tier: str) -> dict[str, Any]:
    return next(v for v in item["verdicts"] if v["tier"] == tier)


def test_readme_example_scores_one_under_math(live_service: Service) -> None:
    (item,) = _post(live_service, "math", [README_ITEM])
    assert item["reward"]["status"] == "scored"
    assert item["reward"]["value"] == 1.0
    answer = _verdict(item, "answer")
    assert answer["feedback"] == "extracted 3/4 from \\boxed{}, reference 0.75: equal (math)"
    assert answer["components"]["correct"] == 1.0


def test_math_batch_through_the_worker_scores_right_wrong_and_runaway_answers(
    live_service: Service,
) -> None:
    items = [
        _text("so x = \\boxed{\\frac{\\sqrt{8}}{2}}", "\\sqrt{2}"),
        _text("<think>maybe \\boxed{2}</think> it is \\boxed{3}", "2"),  # thinking does not count
        _text("\\boxed{(1, 2]}", "(1,2]"),
        _text("\\boxed{10^{10^{10^{10}}}}", "7"),
        _text("\\boxed{٣}", "3"),  # an Arabic-Indic digit is not our 3
        _text("The answer is 75\\%.", "0.75"),
    ]
    started = time.monotonic()
    right, hidden, interval, runaway, foreign, percent = _post(live_service, "math", items)
    took = time.monotonic() - started
    assert right["reward"]["value"] == 1.0
    assert interval["reward"]["value"] == 1.0
    assert percent["reward"]["value"] == 1.0
    assert hidden["reward"]["value"] == 0.0
    assert _verdict(hidden, "answer")["reason"] == "wrong_answer"
    assert foreign["reward"]["value"] == 0.0
    assert _verdict(foreign, "answer")["reason"] == "foreign_digits"
    # The runaway is a scored failure with its reason, within the 5 s bound (plus a restart).
    assert runaway["reward"] == runaway["reward"] | {"status": "scored", "value": 0.0}
    assert _verdict(runaway, "answer")["reason"] == "math_timeout"
    assert "longer than 5 s" in _verdict(runaway, "answer")["feedback"]
    assert took < 30


def test_runaway_answer_in_the_inline_lane_does_not_stall_the_api(live_service: Service) -> None:
    started = time.monotonic()
    (item,) = _post(live_service, "math", [_text("\\boxed{99999999!}", "5")])
    assert time.monotonic() - started < 20
    assert item["reward"]["status"] == "scored"
    assert item["reward"]["value"] == 0.0
    assert _verdict(item, "answer")["reason"] == "math_timeout"
    # The API answers the next request at once: the comparison child was replaced, not waited on.
    (again,) = _post(live_service, "math", [README_ITEM])
    assert again["reward"]["value"] == 1.0


def test_math_answer_not_found_goes_to_people(live_service: Service) -> None:
    # It waits on people: the request answers when its wait runs out, the reward pending.
    (item,) = _post(live_service, "math", [_text("I am not sure of the result.", "4")], wait_s=3)
    assert item["reward"]["status"] == "pending"
    answer = _verdict(item, "answer")
    assert answer["reason"] == "no_answer"
    assert answer["feedback"].startswith("no final answer found outside <think> blocks")
    with live_service.client() as client:
        queues = {q["name"]: q for q in client.get("/v1/review/queues").json()}
    assert queues["math-answers"]["waiting"] >= 1, queues


def test_gsm8k_reads_the_hash_line_and_gates_a_missing_answer(live_service: Service) -> None:
    right, commas, missing = _post(
        live_service,
        "gsm8k",
        [
            _text("She pays 3 * 4 = 12 dollars.\n#### 12", "12"),
            _text("Total: 1,234 apples\n#### $1,234", "1234"),
            _text("She pays 12 dollars.", "12"),  # the number is there, the answer line is not
        ],
    )
    assert right["reward"]["value"] == 1.0
    assert commas["reward"]["value"] == 1.0
    assert missing["reward"]["status"] == "scored"
    assert missing["reward"]["value"] == 0.0
    assert "no final answer" in missing["reward"]["reason"]


def test_qa_normalised_match_against_any_reference(live_service: Service) -> None:
    right, wrong = _post(
        live_service,
        "qa",
        [
            _text("<answer>the Eiffel Tower.</answer>", ["Eiffel Tower", "Tour Eiffel"]),
            _text("<answer>Big Ben</answer>", ["Eiffel Tower", "Tour Eiffel"]),
        ],
    )
    assert right["reward"]["value"] > 0.9
    assert _verdict(right, "answer")["components"]["correct"] == 1.0
    assert wrong["reward"]["value"] < 0.3


def test_a_trajectorys_text_final_answer_gets_its_outcome_from_the_answer_tier(
    live_service: Service,
) -> None:
    policy = {
        "name": "agent-math",
        "ladders": {"json": [{"tier": "schema"}], "text": [{"tier": "answer"}]},
        "trajectory": {"step_weight": 0.3, "outcome_weight": 0.7},
    }
    schema = {"type": "object", "required": ["tool"]}
    step = {
        "action": {"kind": "json", "payload": {"tool": "calc"}, "reference": {"schema": schema}},
        "observation": "0.75",
    }

    def trajectory(final: str) -> dict[str, Any]:
        return {"kind": "trajectory", "steps": [step], "final_answer": _text(final, "3/4")}

    with live_service.client() as client:
        response = client.post("/v1/policies", json={"document": policy})
        assert response.status_code == 201, response.text
    right, wrong = _post(
        live_service, "agent-math", [trajectory("So \\boxed{0.75}"), trajectory("\\boxed{0.7}")]
    )
    assert right["reward"]["status"] == wrong["reward"]["status"] == "scored"
    assert right["reward"]["value"] == 1.0
    assert wrong["reward"]["value"] == 0.3  # the step's 1.0 at 0.3, the outcome's 0 at 0.7
