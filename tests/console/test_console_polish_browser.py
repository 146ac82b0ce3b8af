"""What was left of issue 35's console, in a real browser (Playwright + Debian Chromium) against
a service of this module's own: the replay report's Activate, a gold item's Remove and a
reviewer's Pause ask first (Enter on the button, Enter on the focused "Yes") and then say once
what they did; at 390 px the job page's KPI numbers stay in their boxes and the queues page
needs no sideways scrolling; the reviewers have one page, which the old address leads to.
Screenshots go to VERIFIER_SCREENSHOTS when set (copied to docs/img/ by hand), else to a
temporary folder."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_support import (
    Console,
    make_policy,
    operator_tab,
    private_console,
    said_once,
    shots,
)
from console_support import asks_with_keyboard as _asks_with_keyboard
from console_support import yes_with_keyboard as _yes_with_keyboard
from support import until

SHOTS = Path(os.environ.get("VERIFIER_SCREENSHOTS") or tempfile.mkdtemp(prefix="polish-shots-"))
RUBRIC = {"dimensions": [{"name": "verdict", "type": "label", "labels": ["good", "bad"]}]}
SCHEMA = {"type": "object", "required": ["tool"]}
#: Every KPI box whose number is wider than the box (scrollWidth > clientWidth), in the page.
OVERFLOWING_KPIS_JS = """() => [...document.querySelectorAll('.kpi')]
  .filter(k => k.scrollWidth > k.clientWidth
    || [...k.children].some(c => c.scrollWidth > c.clientWidth))
  .map(k => k.textContent.trim().replace(/\\s+/g, ' '))"""
#: Every card (or table) that scrolls sideways inside itself, in the page.
SCROLLING_JS = """() => [...document.querySelectorAll('.card-panel, table')]
  .filter(e => e.scrollWidth > e.clientWidth + 1)
  .map(e => e.id || e.getAttribute('aria-labelledby') || e.tagName)"""
#: An old page's Pause form, posting to the old address with the page's CSRF token.
POST_TO_OLD_ADDRESS_JS = """(name) => {
  const form = Object.assign(document.createElement('form'),
    {method: 'post', action: '/console/people/reviewers'});
  const token = document.querySelector('input[name=csrf_token]').value;
  for (const [k, v] of [['csrf_token', token], ['reviewer', name], ['action', 'pause']]) {
    const field = Object.assign(document.createElement('input'), {name: k, value: v});
    form.append(Object.assign(field, {type: 'hidden'}));
  }
  document.body.append(form);
  form.submit();
}"""
#: The column names a card row shows cut short (wider than their place), in the page.
CUT_LABELS_JS = """() => [...document.querySelectorAll('table.cards td[data-label]')]
  .filter(td => {
    const probe = document.createElement('span');
    const label = getComputedStyle(td, '::before');
    probe.style.cssText = `font: ${label.font}; white-space: nowrap; position: absolute`;
    probe.textContent = td.dataset.label;
    document.body.append(probe);
    const cut = probe.getBoundingClientRect().width > parseFloat(label.width) + 0.5;
    probe.remove();
    return cut;
  })
  .map(td => td.dataset.label)"""


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with private_console(tmp_path_factory, "cpolish") as state:
        yield state


def test_replay_activate_asks_first_then_says_what_it_did(console: Console, browser: Any) -> None:
    name = f"replayed-{uuid.uuid4().hex[:6]}"
    for version in (1, 2):
        config = {"schema": {**SCHEMA, "title": f"v{version}"}}
        make_policy(
            console, {"name": name, "ladders": {"json": [{"tier": "schema", "config": config}]}}
        )
    with console.service.client() as client:  # v2 stored as a draft, v1 still active
        assert client.post(f"/v1/policies/{name}/versions/1/activate").status_code == 200
    path = f"/console/policies/{name}/versions/2/replay"
    with operator_tab(browser, console.service.base_url, path, console.operator) as tab:
        tab.wait_for_selector("#status:not(:has-text('Replaying'))")
        _asks_with_keyboard(tab, "Activate v2", "Yes, activate v2")
        question = tab.locator("#confirm").inner_text()
        assert f"Activate v2 of {name}?" in question
        assert "instead of v1" in question
        with console.service.client() as client:  # asking changed nothing
            assert client.get(f"/v1/policies/{name}").json()["active_version"] == 1
        shots(tab, SHOTS, "console-replay-confirm-activate", fits_390=True)
        # Backing out keeps v1 and the report.
        with tab.expect_navigation():
            tab.get_by_role("link", name="No, keep v1").click()
        assert tab.locator("#confirm").count() == 0
        _asks_with_keyboard(tab, "Activate v2", "Yes, activate v2")
        _yes_with_keyboard(tab)
        tab.wait_for_url(f"**/console/policies/{name}")
        assert tab.locator("#active-version").inner_text() == "v2 active"
        said_once(tab, f"v2 of {name} is active (was v1)")
    with console.service.client() as client:
        assert client.get(f"/v1/policies/{name}").json()["active_version"] == 2


def test_remove_gold_asks_first_then_says_what_it_did(console: Console, browser: Any) -> None:
    queue = f"gold-{uuid.uuid4().hex[:6]}"
    text = f"Is this tool call well formed? {uuid.uuid4().hex[:8]}"
    gold = {"kind": "text", "payload": {"text": text}, "rubric": RUBRIC,
            "answer": {"verdict": "good"}}  # fmt: skip
    with console.service.client() as client:
        made = client.post(f"/v1/review/queues/{queue}/gold", json=gold)
    assert made.status_code == 201, made.text
    task = made.json()["task_id"]
    path = "/console/people/gold"
    with operator_tab(browser, console.service.base_url, path, console.operator) as tab:
        row = tab.locator(f"#gold-{task}")
        assert "served" in row.locator("td").nth(5).inner_text()
        _asks_with_keyboard(tab, f"Remove gold item {task[:12]}", "Yes, remove it")
        question = tab.locator("#confirm").inner_text()
        assert f"Remove gold item {task[:12]} from {queue}?" in question
        assert text in question  # which item it is
        assert "served" in row.locator("td").nth(5).inner_text()  # not yet
        shots(tab, SHOTS, "console-people-confirm-remove", fits_390=True)
        _yes_with_keyboard(tab)
        assert "removed" in row.locator("td").nth(5).inner_text()
        assert f"Gold item {task[:12]} removed" in tab.locator("#flash").inner_text()
        shots(tab, SHOTS, "console-people-flash-remove", fits_390=True)
        said_once(tab, f"Gold item {task[:12]} removed")


def test_pause_asks_first_then_says_what_it_did(console: Console, browser: Any) -> None:
    ann = f"ann-{uuid.uuid4().hex[:6]}"
    with console.service.client() as client:  # a reviewer the page lists, active
        for step in ("pause", "unpause"):
            assert client.post(f"/v1/review/reviewers/{ann}/{step}").status_code == 204

    def paused() -> bool:
        with console.service.client() as client:
            listed = {r["reviewer"]: r for r in client.get("/v1/review/reviewers").json()}
        return bool(listed[ann]["paused"])

    path = "/console/reviewers"
    with operator_tab(browser, console.service.base_url, path, console.operator) as tab:
        row = tab.locator(f"#reviewers tr[data-reviewer='{ann}']")
        assert "active" in row.locator("td.state").inner_text()
        _asks_with_keyboard(tab, f"Pause {ann}", f"Yes, pause {ann}")
        assert f"Pause reviewer {ann}?" in tab.locator("#confirm").inner_text()
        assert not paused()
        # Backing out leaves her reviewing.
        with tab.expect_navigation():
            tab.get_by_role("link", name=f"No, let {ann} keep reviewing").click()
        assert tab.locator("#confirm").count() == 0
        assert not paused()
        _asks_with_keyboard(tab, f"Pause {ann}", f"Yes, pause {ann}")
        shots(tab, SHOTS, "console-people-confirm-pause", fits_390=True)
        _yes_with_keyboard(tab)
        assert "paused" in row.locator("td.state").inner_text()
        assert f"{ann} is paused" in tab.locator("#flash").inner_text()
        assert paused()
        shots(tab, SHOTS, "console-people-flash-pause", fits_390=True)
        said_once(tab, f"{ann} is paused")
        # Someone who has not answered yet: by name, the same question.
        bob = f"bob-{uuid.uuid4().hex[:6]}"
        tab.get_by_label("Reviewer's name").fill(bob)
        with tab.expect_navigation():
            tab.keyboard.press("Enter")
        assert f"Pause reviewer {bob}?" in tab.locator("#confirm").inner_text()
        tab.wait_for_selector("#confirm button:focus", timeout=5000)
        assert tab.evaluate("document.activeElement.textContent.trim()") == f"Yes, pause {bob}"
        _yes_with_keyboard(tab)
        assert f"{bob} is paused" in tab.locator("#flash").inner_text()


def test_one_reviewers_page_and_the_old_address_leads_there(console: Console, browser: Any) -> None:
    ann = f"cid-{uuid.uuid4().hex[:6]}"
    with console.service.client() as client:  # a reviewer the page lists, active
        for step in ("pause", "unpause"):
            assert client.post(f"/v1/review/reviewers/{ann}/{step}").status_code == 204
    base = console.service.base_url
    with httpx.Client(base_url=base, follow_redirects=False) as anyone:
        moved = anyone.get("/console/people/reviewers?confirm=pause&reviewer=x")
        assert moved.status_code == 308
        assert moved.headers["location"] == "/console/reviewers?confirm=pause&reviewer=x"
        assert anyone.post("/console/people/reviewers").status_code == 308  # a post stays one
    with operator_tab(browser, base, "/console/people/gold", console.operator) as tab:
        # The People tabs and the top bar lead to the same page.
        with tab.expect_navigation():
            tab.get_by_role("link", name="Reviewers: pause, resume").click()
        assert tab.url == f"{base}/console/reviewers"
        current = tab.locator("header nav a[aria-current='page']")
        assert current.inner_text() == "Reviewers"
        assert current.get_attribute("href") == "/console/reviewers"
        # Pace and pausing on the one page.
        row = tab.locator(f"#reviewers tr[data-reviewer='{ann}']")
        assert row.locator(".answered-1h").inner_text() == "0"
        assert row.locator(".per-hour").inner_text() == "\N{EN DASH}"
        assert "active" in row.locator("td.state").inner_text()
        assert row.get_by_role("button", name=f"Pause {ann}").count() == 1
        # An old bookmark of the question asks it here.
        tab.goto(f"{base}/console/people/reviewers?confirm=pause&reviewer={ann}")
        assert tab.url == f"{base}/console/reviewers?confirm=pause&reviewer={ann}"
        assert f"Pause reviewer {ann}?" in tab.locator("#confirm").inner_text()
        shots(tab, SHOTS, "console-reviewers-confirm-pause", fits_390=True)
        # A form of an old page posting to the old address still works (308 keeps the post).
        with tab.expect_navigation():
            tab.evaluate(POST_TO_OLD_ADDRESS_JS, ann)
        assert tab.url == f"{base}/console/reviewers"
        said_once(tab, f"{ann} is paused")
        assert "paused" in row.locator("td.state").inner_text()
        shots(tab, SHOTS, "console-reviewers", fits_390=True)
        tab.set_viewport_size({"width": 1280, "height": 800})
        field = tab.get_by_label("Reviewer's name").bounding_box()  # a name's width
        assert field is not None
        assert 150 <= field["width"] <= 320
        tab.set_viewport_size({"width": 390, "height": 844})
        assert tab.evaluate(SCROLLING_JS) == []  # a card per reviewer on a phone
        assert tab.evaluate(CUT_LABELS_JS) == []  # each value's column name in full


def test_job_kpis_and_the_queues_fit_a_phone(console: Console, browser: Any) -> None:
    queue = f"phone-{uuid.uuid4().hex[:6]}"
    human = {"tier": "human", "config": {"queue": queue, "rubric": RUBRIC}}
    make_policy(console, {"name": queue, "ladders": {"text": [human]}})
    items = [{"kind": "text", "payload": {"text": uuid.uuid4().hex}} for _ in range(2)]
    with console.service.client() as client:
        posted = client.post("/v1/rewards", json={"policy": queue, "items": items})
        assert posted.status_code == 202, posted.text
        job = f"/v1/jobs/{posted.json()['id']}"
        until(
            lambda: all(i["state"] == "deferred" for i in client.get(job).json()["items"]),
            what="both items waiting for people",
        )
    path = f"/console/jobs/{posted.json()['id']}"
    base = console.service.base_url
    with operator_tab(browser, base, path, console.operator, viewport=(390, 844)) as tab:
        assert tab.locator("#job-cost").inner_text() == "200.000"  # two items for people
        assert tab.evaluate(OVERFLOWING_KPIS_JS) == []
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390
        tab.screenshot(path=str(SHOTS / "console-job-kpis-390.png"), full_page=True)
        tab.set_viewport_size({"width": 1280, "height": 800})
        assert tab.evaluate(OVERFLOWING_KPIS_JS) == []
        tab.screenshot(path=str(SHOTS / "console-job-kpis-1280.png"), full_page=True)

        tab.set_viewport_size({"width": 390, "height": 844})
        tab.goto(f"{base}/console/queues")
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390
        assert tab.evaluate(SCROLLING_JS) == []  # nothing scrolls sideways inside a card
        # Every queue's state (with its reason) is on the screen, not past its right edge.
        for state in tab.locator("#queues td.state").all():
            box = state.bounding_box()
            assert box is not None
            assert box["x"] >= 0
            assert box["x"] + box["width"] <= 390
        # Each cell still says which column it is.
        label = tab.locator("#queue-tier\\.fast td.state").evaluate(
            "td => getComputedStyle(td, '::before').content"
        )
        assert label == '"State"'
        assert tab.evaluate(CUT_LABELS_JS) == []
        tab.screenshot(path=str(SHOTS / "console-queues-phone-390.png"), full_page=True)
        tab.set_viewport_size({"width": 1280, "height": 800})
        tab.screenshot(path=str(SHOTS / "console-queues-phone-1280.png"), full_page=True)
