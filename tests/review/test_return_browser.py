"""A reviewer coming back, in Chromium against a live service: a closed tab's task comes back
to her with its draft (not "held by someone else" until its lease expires); a draft outlives
its lease's expiry; and a gold item is served at the queue's gold_rate, answered like any task
and counted in her gold accuracy."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from review_page_support import (
    CLEAR_AND_TONE,
    review_policy,
    sign_in,
    submit_job,
    wait_for_task,
)
from support import Service

RUBRIC = CLEAR_AND_TONE


def _half_answer(tab: Any) -> None:
    tab.keyboard.press("3")  # clear: 3
    tab.get_by_label("Comment").fill("half done")
    tab.wait_for_selector("#save-state:has-text('Draft saved')")


def _has_the_draft(tab: Any) -> None:
    assert tab.locator("fieldset[data-dim=clear] input:checked").input_value() == "3"
    assert tab.get_by_label("Comment").input_value() == "half done"


def test_a_closed_tab_gives_her_task_back_with_its_draft(
    live_service: Service, browser: Any, reviewer: str, tmp_path: Path
) -> None:
    queue = f"back-{uuid.uuid4().hex[:8]}"
    text = f"Come back to me {uuid.uuid4().hex}"
    item = {"kind": "text", "payload": {"text": text}}
    submit_job(live_service, review_policy("text", queue, RUBRIC, None), [item])
    context, tab = sign_in(browser, live_service.base_url, reviewer)
    try:
        wait_for_task(tab, live_service.base_url, queue)
        _half_answer(tab)
        tab.close()  # the tab is closed; the lease (claim_ttl_s 120 s) is still live
        again = context.new_page()
        again.goto(f"{live_service.base_url}/review/{queue}")
        assert again.locator("#answer").count() == 1, again.content()[:400]
        assert again.locator(".item .text").inner_text() == text
        _has_the_draft(again)
        # (copies of these are in docs/img/)
        again.screenshot(path=str(tmp_path / "review-task-back-1280.png"), full_page=True)
        again.set_viewport_size({"width": 390, "height": 844})
        again.screenshot(path=str(tmp_path / "review-task-back-390.png"), full_page=True)
    finally:
        context.close()


def test_a_draft_outlives_its_lease(live_service: Service, browser: Any, reviewer: str) -> None:
    queue = f"keep-{uuid.uuid4().hex[:8]}"
    text = f"Keep my draft {uuid.uuid4().hex}"
    item = {"kind": "text", "payload": {"text": text}}
    submit_job(live_service, review_policy("text", queue, RUBRIC, None, ttl_s=2), [item])
    context, tab = sign_in(browser, live_service.base_url, reviewer)
    try:
        wait_for_task(tab, live_service.base_url, queue)
        first = tab.url
        _half_answer(tab)
        tab.close()
        again = context.new_page()
        again.wait_for_timeout(3000)  # the lease expires (no page sends heartbeats)
        again.goto(f"{live_service.base_url}/review/{queue}")
        assert again.locator("#answer").count() == 1, again.content()[:400]
        assert again.url != first  # a new lease of the same task
        assert again.locator(".item .text").inner_text() == text
        _has_the_draft(again)
    finally:
        context.close()


def test_gold_is_served_answered_and_counted(
    live_service: Service, browser: Any, reviewer: str
) -> None:
    queue = f"gold-{uuid.uuid4().hex[:8]}"
    policy = review_policy("text", queue, RUBRIC, None)
    policy["ladders"]["text"][-1]["config"]["gold_rate"] = 0.2
    tag = uuid.uuid4().hex[:6]
    items = [{"kind": "text", "payload": {"text": f"Real {i} {tag}"}} for i in range(6)]
    submit_job(live_service, policy, items)
    gold_text = f"Known answer {tag}"
    with live_service.client() as operator:
        added = operator.post(
            f"/v1/review/queues/{queue}/gold",
            json={"kind": "text", "payload": {"text": gold_text}, "rubric": RUBRIC,
                  "answer": {"clear": 4, "tone": "kind"}},
        )  # fmt: skip
        assert added.status_code == 201, added.text
    context, tab = sign_in(browser, live_service.base_url, reviewer)
    seen: list[str] = []
    try:
        wait_for_task(tab, live_service.base_url, queue)
        for _ in range(5):
            shown = tab.locator(".item .text").inner_text()
            seen.append(shown)
            tab.keyboard.press("4")  # clear: 4
            tab.keyboard.press("1")  # tone: kind
            tab.keyboard.press("Control+Enter")
            tab.wait_for_function(
                "s => document.querySelector('.item .text')?.textContent !== s", arg=shown
            )
    finally:
        context.close()
    assert gold_text in seen, f"no gold in the first 5 tasks at gold_rate 0.2: {seen}"
    assert gold_text not in seen[seen.index(gold_text) + 1 :]  # each reviewer answers it once
    with live_service.client() as operator:
        listed = operator.get("/v1/review/reviewers").json()
    (me,) = [r for r in listed if r["reviewer"] == reviewer]
    assert (me["gold_answered"], me["gold_correct"]) == (1, 1)
