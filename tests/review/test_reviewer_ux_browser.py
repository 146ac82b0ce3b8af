"""What reviewers expect of the task page, in Chromium against a live service (issue 35): undo of
the last answer before it counts, progress in this session, times in her own time zone, a phone
layout that does not scroll sideways, dark mode, a visible keyboard focus and items shown as
the trainer sent them. Screenshots of the task page (copies in docs/img/) go to
VERIFIER_SCREENSHOTS."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from review_page_support import (
    CLEAR_AND_TONE,
    review_policy,
    sign_in,
    submit_job,
    wait_for_task,
)
from support import Service

# Screenshots go to VERIFIER_SCREENSHOTS when set (copied to docs/img/ by hand when the pages
# change, after looking at them); the suite never writes into the source tree.
IMG = Path(os.environ.get("VERIFIER_SCREENSHOTS") or tempfile.mkdtemp(prefix="review-shots-"))
RUBRIC = CLEAR_AND_TONE


def _answers(service: Service, queue: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=service.base_url, headers=service.auth_headers) as api:
        exported = api.get("/v1/review/export.jsonl", params={"queue": queue})
    assert exported.status_code == 200, exported.text
    return [json.loads(line) for line in exported.text.splitlines() if line.strip()]


def _text(tab: Any) -> str:
    return str(tab.locator(".item .text").inner_text())


def test_undo_the_last_answer_before_it_counts(
    live_service: Service, browser: Any, reviewer: str
) -> None:
    queue = f"undo-{uuid.uuid4().hex[:8]}"
    items = [{"kind": "text", "payload": {"text": f"{n} {uuid.uuid4().hex}"}} for n in "AB"]
    submit_job(live_service, review_policy("text", queue, RUBRIC, None), items)
    # A reviewer in India reading a British clock: times on the page are hers, not UTC.
    context, tab = sign_in(
        browser, live_service.base_url, reviewer, timezone_id="Asia/Kolkata", locale="en-GB"
    )
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    try:
        wait_for_task(tab, live_service.base_url, queue)
        held = tab.locator("#lease-state time")
        utc = datetime.fromisoformat(str(held.get_attribute("datetime")))
        expected = utc.replace(tzinfo=utc.tzinfo or ZoneInfo("UTC"))
        local = expected.astimezone(ZoneInfo("Asia/Kolkata")).strftime("%H:%M:%S")
        assert held.inner_text() == local
        assert "UTC" not in tab.locator("#lease-state").inner_text()
        # Progress: nothing done yet in this session, the other task still waiting.
        assert tab.locator("#progress").inner_text() == "0 done · 1 left"

        first_url, first = tab.url, _text(tab)
        tab.keyboard.press("2")
        tab.keyboard.press("3")  # tone: rude
        tab.wait_for_selector("main.task-layout[data-next=ready]", timeout=30_000)
        tab.keyboard.press("Control+Enter")
        tab.wait_for_function("t => document.querySelector('.item .text')?.textContent !== t",
                              arg=first)  # fmt: skip
        undo = tab.locator("#undo")
        assert "sent in" in undo.inner_text()
        assert undo.get_by_role("button", name="Undo").count()
        tab.screenshot(path=str(IMG / "review-undo-1280.png"))
        assert _answers(live_service, queue) == []  # not counted yet: nothing reached the trainer

        tab.keyboard.press("z")  # undo: the answered task again, with the answer filled in
        tab.wait_for_url(first_url)
        assert _text(tab) == first
        assert tab.locator("fieldset[data-dim=clear] input:checked").input_value() == "2"
        assert tab.locator("fieldset[data-dim=tone] input:checked").input_value() == "rude"
        tab.locator("fieldset[data-dim=tone] label", has_text="kind").click()  # revised
        tab.wait_for_selector("main.task-layout[data-next=ready]", timeout=30_000)
        tab.keyboard.press("Control+Enter")
        tab.wait_for_function("t => document.querySelector('.item .text')?.textContent !== t",
                              arg=first)  # fmt: skip
        # The window ends: the answer is sent and counts, and the session's progress says so.
        tab.wait_for_selector("#undo:has-text('recorded')", timeout=15_000)
        assert tab.locator("#progress").inner_text().startswith("1 done")
        (recorded,) = _answers(live_service, queue)
        assert recorded["values"] == {"clear": 2, "tone": "kind"}

        # Back to an answer that counts: said plainly, not "it went back to the queue".
        tab.go_back()
        tab.wait_for_selector("h1:has-text('You answered this task')")
        assert "went back to the queue" not in tab.content()
        tab.goto(f"{live_service.base_url}/review/{queue}")  # her other task comes back to her
        assert _text(tab) not in (first, "")
        tab.keyboard.press("4")
        tab.keyboard.press("2")
        tab.keyboard.press("Control+Enter")  # the queue's last task: recorded at once
        tab.wait_for_selector("text=No more tasks")
        assert sorted(a["values"]["clear"] for a in _answers(live_service, queue)) == [2, 4]
        assert errors == []
    finally:
        context.close()


def _luminance(css: str) -> float:
    parts = [float(p) for p in css[css.index("(") + 1 : css.index(")")].split(",")[:3]]
    return sum(w * c for w, c in zip((0.2126, 0.7152, 0.0722), parts, strict=True)) / 255


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_phone_width_dark_mode_focus_and_items_as_sent(
    live_service: Service, browser: Any, reviewer: str, scheme: str
) -> None:
    queue = f"look-{scheme}-{uuid.uuid4().hex[:6]}"
    long_line = "total = " + " + ".join(f"value_{i}" for i in range(60))
    item = {"kind": "code", "payload": {"code": f"def f():\n    {long_line}\n    return total",
                                        "tests": "def test_f():\n    assert f"}}  # fmt: skip
    submit_job(live_service, review_policy("code", queue, RUBRIC, None), [item])
    context, tab = sign_in(browser, live_service.base_url, reviewer, color_scheme=scheme)
    try:
        wait_for_task(tab, live_service.base_url, queue)
        # As sent: the code's lines kept (the long one scrolls in its box), no default fields.
        src = tab.locator("pre.src").first
        assert src.inner_text().splitlines()[1].strip() == long_line
        assert src.evaluate("e => getComputedStyle(e).whiteSpace") == "pre"
        assert tab.locator("text=Other fields").count() == 0
        body = tab.evaluate("getComputedStyle(document.body).backgroundColor")
        ink = tab.evaluate("getComputedStyle(document.querySelector('main')).color")
        if scheme == "dark":
            assert _luminance(body) < 0.15 < 0.7 < _luminance(ink)
        else:
            assert _luminance(body) > 0.9 > 0.3 > _luminance(ink)
        # The keyboard focus is drawn: a 3 px ring on the option in focus.
        tab.keyboard.press("Tab")
        tab.keyboard.press("Shift+Tab")
        ring = tab.evaluate(
            "(() => { const o = document.activeElement.closest('.opt');"
            " const s = getComputedStyle(o); return [s.outlineStyle, s.outlineWidth]; })()"
        )
        assert ring == ["solid", "3px"]
        tab.screenshot(path=str(IMG / f"review-task-1280-{scheme}.png"))

        # A phone: one column, the rubric under the item, nothing wider than the screen.
        tab.set_viewport_size({"width": 390, "height": 844})
        tab.reload()
        tab.wait_for_selector("#answer")
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390
        item_box = tab.locator("section.item").bounding_box()
        rubric_box = tab.locator("#answer").bounding_box()
        assert rubric_box["y"] >= item_box["y"] + item_box["height"]
        assert rubric_box["x"] + rubric_box["width"] <= 390
        tab.screenshot(path=str(IMG / f"review-task-390-{scheme}.png"), full_page=True)
        tab.goto(f"{live_service.base_url}/review")
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390
        tab.screenshot(path=str(IMG / f"review-queues-390-{scheme}.png"), full_page=True)
    finally:
        context.close()


def test_a_tool_call_without_args_shows_none(live_service: Service, browser: Any,
                                             reviewer: str) -> None:  # fmt: skip
    queue = f"tool-{uuid.uuid4().hex[:8]}"
    item = {"kind": "json", "payload": {"tool": "list_files"}}
    submit_job(live_service, review_policy("json", queue, RUBRIC, None), [item])
    context, tab = sign_in(browser, live_service.base_url, reviewer)
    try:
        wait_for_task(tab, live_service.base_url, queue)
        shown = tab.locator("section.item").inner_text()
        assert "list_files" in shown
        assert "No arguments." in shown
        assert "null" not in shown
        assert "args" not in shown
    finally:
        context.close()
