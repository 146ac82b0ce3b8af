"""The shipped qa-judge policy (answer -> judge.llm -> human) run through real processes over a
QA set, then replayed in the console with its cost per step; and the calibration page telling
apart two models served behind one endpoint name.

The judge is the FAULT-INJECTION STUB of the OpenAI protocol (tests/tiers/judge/judge_stub.py,
a process), priced per token, answering each item with a label (and, for some, as another
model) this test chose; people answer over the review API. The replay's cost per step, in its
JSON and on the page, is what the cost ledger charged the jobs: the answer tier's cost class
per item, the judge's tokens at the endpoint's price, people's cost class per item sent to
them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from judge_console_support import (
    answer_reviews,
    calibration,
    completed,
    judge_service,
    make_operator,
    reply,
    shot,
    signed_in,
)
from sqlalchemy import create_engine, text
from support import Service

PRICE = {"price_per_1k_prompt": 2.0, "price_per_1k_completion": 10.0}
#: The stub's usage per call (120 prompt, 30 completion tokens) at PRICE.
UNITS_PER_CALL = (120 * 2.0 + 30 * 10.0) / 1000
#: Items the judge is unsure of (people asked): (label, model the server says it is, people).
UNSURE = [
    ("correct", None, 1.0),  # None: the stub answers as the model asked for (stub-judge-7b)
    ("incorrect", None, 0.0),
    ("correct", "stub-judge-8b", 0.0),
    ("incorrect", "stub-judge-8b", 1.0),
]
EXACT, SURE = 2, 2  # items the answer tier decides; items the judge is sure of


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A service that ran one qa-judge job whose unsure items people answered."""
    tag = uuid.uuid4().hex[:6]
    rules = []
    for i, (label, model, _) in enumerate(UNSURE):
        rule = {"match": f"case-{tag}-{i}\\b", "content": reply(label, 0.5)}
        rules.append(rule if model is None else {**rule, "model": model})
    with judge_service(tmp_path_factory, "jreplay", rules, **PRICE) as (service, pg_url):
        yield {**_run(service, tag), "service": service, "pg_url": pg_url}


def _run(service: Service, tag: str) -> dict[str, Any]:
    operator = make_operator(service, tag)
    unsure = [f"<answer>Lutetia, case-{tag}-{i}</answer>" for i in range(len(UNSURE))]
    texts = [
        *(f"<answer>Paris</answer> exact-{tag}-{i}" for i in range(EXACT)),
        *(f"<answer>Lutetia, sure-{tag}-{i}</answer>" for i in range(SURE)),
        *unsure,
    ]
    items = [
        {"kind": "text", "payload": {"text": t}, "reference": {"answer": "Paris"},
         "metadata": {"question": "What is the capital of France?"}}
        for t in texts
    ]  # fmt: skip
    people = {t: score for t, (_, _, score) in zip(unsure, UNSURE, strict=True)}
    reviewer_key = service.create_key(f"rv-{tag}", "reviewer")
    with service.client(timeout=60) as trainer, service.client(api_key=reviewer_key) as reviewer:
        created = trainer.post(
            "/v1/rewards", json={"policy": "qa-judge", "items": items, "wait_s": 0}
        )
        assert created.status_code == 202, created.text
        location = created.headers["location"]
        deadline = time.monotonic() + 90
        answer_reviews(
            reviewer, ["qa-answers"], people, deadline, lambda: trainer.get(location).text
        )
        job = completed(trainer, location, deadline)
        ledger = trainer.get("/v1/policies/qa-judge/versions/1/cost")
        assert ledger.status_code == 200, ledger.text
        replay = trainer.get("/v1/console/policies/qa-judge/versions/1/replay?limit=100")
        assert replay.status_code == 200, replay.text
    return {"operator": operator, "job": job, "ledger": ledger.json(), "replay": replay.json()}


def test_the_job_climbed_answer_judge_people_as_planned(ran: dict[str, Any]) -> None:
    tiers = [[v["tier"] for v in item["verdicts"]] for item in ran["job"]["items"]]
    assert tiers == (
        [["answer"]] * EXACT
        + [["answer", "judge.llm"]] * SURE
        + [["answer", "judge.llm", "human"]] * len(UNSURE)
    )


def test_the_replay_cost_per_step_is_the_ledgers(ran: dict[str, Any]) -> None:
    ledger = {tier: cost["cost_units"] for tier, cost in ran["ledger"]["tiers"].items()}
    draft = ran["replay"]["draft"]
    assert ran["replay"]["items"] == EXACT + SURE + len(UNSURE)
    assert draft["unavailable"] == 0
    assert list(draft["cost_by_tier"]) == ["answer", "judge.llm", "human"]  # ladder order
    assert draft["cost_by_tier"] == pytest.approx(ledger)
    # The judge's tokens at the endpoint's price, not its cost class (0.01 a call).
    judged = SURE + len(UNSURE)
    assert draft["cost_by_tier"]["judge.llm"] == pytest.approx(judged * UNITS_PER_CALL)
    assert draft["cost_by_tier"]["human"] == pytest.approx(100.0 * len(UNSURE))
    assert draft["cost_units"] == pytest.approx(ran["ledger"]["cost_units"])
    assert draft["escalations"] == {
        "answer": EXACT + SURE + len(UNSURE), "judge.llm": judged, "human": len(UNSURE),
    }  # fmt: skip


def test_the_replay_page_shows_the_ledgers_cost_per_step(
    ran: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    service: Service = ran["service"]
    ledger = {tier: cost["cost_units"] for tier, cost in ran["ledger"]["tiers"].items()}
    replay = "/console/policies/qa-judge/versions/1/replay"
    with signed_in(browser, service, ran["operator"], replay) as page:
        page.wait_for_selector("main[data-loaded=true]")
        table = page.get_by_role("table", name="Cost units per step")
        rows = [r.locator("td").all_inner_texts() for r in table.locator("tbody tr").all()]
        assert rows == [
            [tier, f"{ledger[tier]:.3f}", f"{ledger[tier]:.3f}"]  # v1 is the active version
            for tier in ("answer", "judge.llm", "human")
        ]
        table.scroll_into_view_if_needed()
        shot(page, "console-policy-replay-step-costs.png", tmp_path)
        page.set_viewport_size({"width": 390, "height": 844})
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 390, wide  # nothing sticks out sideways on a phone
        table.scroll_into_view_if_needed()
        shot(page, "console-policy-replay-step-costs-390.png", tmp_path)


def _judges(service: Service) -> list[dict[str, Any]]:
    return [j for j in calibration(service)["judges"] if j["policy"] == "qa-judge"]


def test_calibration_tells_two_models_behind_one_endpoint_apart(ran: dict[str, Any]) -> None:
    judges = {j["model"]: j for j in _judges(ran["service"])}
    assert set(judges) == {"stub-judge-7b", "stub-judge-8b"}
    assert {j["endpoint"] for j in judges.values()} == {"judge"}
    assert (judges["stub-judge-7b"]["pairs"], judges["stub-judge-7b"]["agreement"]) == (2, 1.0)
    assert (judges["stub-judge-8b"]["pairs"], judges["stub-judge-8b"]["agreement"]) == (2, 0.0)
    # Verdicts stored before models were recorded: the endpoint's model as configured now.
    engine = create_engine(ran["pg_url"])
    try:
        with engine.begin() as connection:
            stripped = connection.execute(
                text(
                    "UPDATE verdicts SET feedback = split_part(feedback, E'\\njudge_model: ', 1)"
                    " WHERE tier = 'judge.llm' AND feedback LIKE '%judge_model: stub-judge-8b'"
                )
            )
            assert stripped.rowcount == 2
    finally:
        engine.dispose()
    (merged,) = _judges(ran["service"])
    assert (merged["model"], merged["pairs"], merged["agreement"]) == ("stub-judge-7b", 4, 0.5)
