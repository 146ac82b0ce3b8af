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

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_support import OPERATOR_PASSWORD
from sqlalchemy import create_engine, text
from support import REPO, Service, free_port, private_backends, start_service

STUB = REPO / "tests" / "tiers" / "judge" / "judge_stub.py"

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


def _start_stub() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(STUB), str(port)], cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(f"{base}/stub/log", timeout=1)
            return process, base
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                process.kill()
                raise
            time.sleep(0.1)


def _reply(label: str, confidence: float) -> str:
    return json.dumps({"label": label, "confidence": confidence, "reasoning": "as planned"})


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A service that ran one qa-judge job whose unsure items people answered."""
    stub, base = _start_stub()
    tag = uuid.uuid4().hex[:6]
    rules = []
    for i, (label, model, _) in enumerate(UNSURE):
        rule = {"match": f"case-{tag}-{i}\\b", "content": _reply(label, 0.5)}
        rules.append(rule if model is None else {**rule, "model": model})
    plan = {"plan": [], "rules": rules, "default": {"content": _reply("correct", 0.95)}}
    httpx.post(f"{base}/stub/plan", json=plan, timeout=5).raise_for_status()
    endpoints = {"judge": {"url": f"{base}/v1", "model": "stub-judge-7b", **PRICE}}
    try:
        with private_backends("jreplay") as (pg_url, redis_url):
            service = start_service(
                tmp_path_factory.mktemp("jreplay"), "ladder,tier.fast,tier.judge,callbacks,review",
                VERIFIER_DATABASE__URL=pg_url, VERIFIER_BROKER__URL=redis_url,
                VERIFIER_JUDGE__ENDPOINTS=json.dumps(endpoints),
            )  # fmt: skip
            try:
                yield {**_run(service, tag), "service": service, "pg_url": pg_url}
            finally:
                service.stop_all()
    finally:
        stub.terminate()
        stub.wait(timeout=10)


def _run(service: Service, tag: str) -> dict[str, Any]:
    operator = f"op-{tag}"
    made = service.cli(
        "users", "create", "--role", "operator", operator, stdin=OPERATOR_PASSWORD + "\n"
    )
    assert made.returncode == 0, made.stderr
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
        answered = 0
        deadline = time.monotonic() + 90
        while answered < len(UNSURE):
            assert time.monotonic() < deadline, trainer.get(location).text
            lease = reviewer.post("/v1/review/queues/qa-answers/next")
            if lease.status_code in (204, 404):  # no task yet: the judge is at it
                time.sleep(0.3)
                continue
            assert lease.status_code == 200, lease.text
            view = lease.json()
            submitted = reviewer.post(
                f"/v1/review/leases/{view['lease_id']}/submit",
                json={"values": {"correct": people[view["task"]["payload"]["text"]]}},
                headers={"Idempotency-Key": uuid.uuid4().hex},
            )
            assert submitted.status_code == 204, submitted.text
            answered += 1
        job = trainer.get(location).json()
        while job["status"] != "completed" and time.monotonic() < deadline:
            time.sleep(0.2)
            job = trainer.get(location).json()
        assert job["status"] == "completed", job
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


def _shot(page: Any, name: str, tmp_path: Path) -> None:
    # Copied to docs/img/ by hand when the page changes (VERIFIER_SCREENSHOTS=docs/img).
    folder = Path(os.environ.get("VERIFIER_SCREENSHOTS") or tmp_path)
    page.screenshot(path=str(folder / name), full_page=True)


def test_the_replay_page_shows_the_ledgers_cost_per_step(
    ran: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    service: Service = ran["service"]
    ledger = {tier: cost["cost_units"] for tier, cost in ran["ledger"]["tiers"].items()}
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    offsite: list[str] = []
    page.on("request", lambda r: offsite.append(r.url) if "127.0.0.1" not in r.url else None)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    replay = "/console/policies/qa-judge/versions/1/replay"
    try:
        page.goto(f"{service.base_url}{replay}")
        page.wait_for_url(f"**/signin?next={replay}")
        page.get_by_label("Username").fill(ran["operator"])
        page.get_by_label("Password").fill(OPERATOR_PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"**{replay}")
        page.wait_for_selector("main[data-loaded=true]")
        table = page.get_by_role("table", name="Cost units per step")
        rows = [r.locator("td").all_inner_texts() for r in table.locator("tbody tr").all()]
        assert rows == [
            [tier, f"{ledger[tier]:.3f}", f"{ledger[tier]:.3f}"]  # v1 is the active version
            for tier in ("answer", "judge.llm", "human")
        ]
        table.scroll_into_view_if_needed()
        _shot(page, "console-policy-replay-step-costs.png", tmp_path)
        page.set_viewport_size({"width": 390, "height": 844})
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 390, wide  # nothing sticks out sideways on a phone
        table.scroll_into_view_if_needed()
        _shot(page, "console-policy-replay-step-costs-390.png", tmp_path)
    finally:
        context.close()
    assert offsite == []
    assert errors == []


def _judges(service: Service) -> list[dict[str, Any]]:
    with service.client() as client:
        answer = client.get("/v1/console/calibration", params={"window": "24h"})
    assert answer.status_code == 200, answer.text
    return [j for j in answer.json()["judges"] if j["policy"] == "qa-judge"]


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
