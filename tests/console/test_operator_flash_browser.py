"""What an operator expects of the console (issue 35), in a real browser (Playwright + Debian
Chromium) against a service of this module's own: cancel, pause, drain, activate and roll back
ask first (a plain form step, keyboard and no script) and then say once what they did
(role=status, gone on reload); the roll back button is readable (contrast >= 4.5:1); the
escalation bars are as long as their share; a queue whose worker is drained says so; the human
tier shows people's review time; items waiting for people are the oldest waiting; the
reviewers' pace is over a real window. Screenshots go to VERIFIER_SCREENSHOTS when set (copied
to docs/img/ by hand when the pages change), else to a temporary folder."""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from console_support import (
    OPERATOR_PASSWORD,
    Console,
    make_policy,
    operator_tab,
    private_console,
    said_once,
    shots,
)
from console_support import confirm_with_keyboard as _confirm_with_keyboard
from support import until

from verifier_service.core.presence import PAUSED_KEY, drain_key

SHOTS = Path(os.environ.get("VERIFIER_SCREENSHOTS") or tempfile.mkdtemp(prefix="console-shots-"))
RUBRIC = {"dimensions": [{"name": "verdict", "type": "label", "labels": ["good", "bad"]}]}
SCHEMA = {"type": "object", "required": ["tool"]}
#: The relative luminance contrast of a computed colour pair (WCAG 2), in the page.
CONTRAST_JS = """el => {
  const s = getComputedStyle(el);
  const rgb = c => c.match(/[0-9.]+/g).slice(0, 3).map(Number);
  const lum = c => {
    const [r, g, b] = rgb(c).map(v => v / 255).map(
      v => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4));
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const [a, b] = [lum(s.color), lum(s.backgroundColor)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with private_console(
        tmp_path_factory, "cflash", VERIFIER_WORKER__CONTROL_POLL_S="0.3"
    ) as state:
        yield state


@pytest.fixture(autouse=True)
def _nothing_paused_or_drained_after(console: Console) -> Iterator[None]:
    yield
    broker = redis.Redis.from_url(console.service.env["VERIFIER_BROKER__URL"])
    broker.delete(PAUSED_KEY)
    for key in broker.scan_iter(match=drain_key("*")):
        broker.delete(key)


def test_cancel_asks_first_then_says_once_what_it_did(console: Console, browser: Any) -> None:
    queue = f"cancel-{uuid.uuid4().hex[:6]}"
    human = {"tier": "human", "config": {"queue": queue, "rubric": RUBRIC}}
    make_policy(console, {"name": queue, "ladders": {"text": [human]}})
    items = [{"kind": "text", "payload": {"text": uuid.uuid4().hex}} for _ in range(2)]
    with console.service.client() as client:
        posted = client.post("/v1/rewards", json={"policy": queue, "items": items})
    assert posted.status_code == 202, posted.text
    job_id = posted.json()["id"]
    path = f"/console/jobs/{job_id}"
    with operator_tab(browser, console.service.base_url, path, console.operator) as tab:
        # Backing out of the question changes nothing.
        tab.get_by_role("button", name="Cancel job").focus()
        with tab.expect_navigation():
            tab.keyboard.press("Enter")
        assert "2 unfinished items" in tab.locator("#confirm").inner_text()
        tab.get_by_role("link", name="No, keep it running").click()
        tab.wait_for_url(f"**{path}")
        assert tab.locator("#job-status").inner_text() == "running"
        assert tab.locator("#confirm").count() == 0
        tab.get_by_role("button", name="Cancel job").focus()
        with tab.expect_navigation():
            tab.keyboard.press("Enter")
        shots(tab, SHOTS, "console-confirm-cancel")
        tab.get_by_role("button", name="Yes, cancel the job").focus()
        with tab.expect_navigation():
            tab.keyboard.press("Enter")
        assert tab.locator("#job-status").inner_text() == "cancelled"
        assert f"Job {job_id} cancelled" in tab.locator("#flash").inner_text()
        shots(tab, SHOTS, "console-flash-cancel")
        said_once(tab, f"Job {job_id} cancelled")


def test_pause_and_resume_without_script(console: Console, browser: Any) -> None:
    """With JavaScript off: the question, the pause, its message; the resume and its message."""
    base = console.service.base_url
    context = browser.new_context(
        java_script_enabled=False, viewport={"width": 1440, "height": 900}
    )
    tab = context.new_page()
    try:
        tab.goto(f"{base}/console/queues")
        tab.wait_for_url("**/signin?next=/console/queues")
        tab.get_by_label("Username").fill(console.operator)
        tab.get_by_label("Password").fill(OPERATOR_PASSWORD)
        tab.get_by_role("button", name="Sign in").click()
        tab.wait_for_url("**/console/queues")
        row = tab.locator("#queue-tier\\.fast")
        assert row.locator(".state").inner_text().strip() == "running"
        _confirm_with_keyboard(tab, "Pause tier.fast", "Yes, pause tier.fast")
        assert row.locator(".state").inner_text().startswith(f"paused by {console.operator}")
        flash = tab.locator("#flash").inner_text()
        assert flash.startswith("Queue tier.fast paused")
        shots(tab, SHOTS, "console-flash-pause")
        said_once(tab, "Queue tier.fast paused")
        tab.get_by_role("button", name="Resume tier.fast").focus()
        with tab.expect_navigation():
            tab.keyboard.press("Enter")  # resuming harms nothing: no question
        said_once(tab, "Queue tier.fast resumed")
        assert row.locator(".state").inner_text().strip() == "running"
    finally:
        context.close()


def test_drain_asks_and_the_queues_of_a_drained_worker_say_so(
    console: Console, browser: Any
) -> None:
    with operator_tab(
        browser, console.service.base_url, "/console/queues", console.operator
    ) as tab:
        working = tab.locator("#worker-table tbody tr").filter(has_text="working")
        assert working.count() == 1
        node = working.get_attribute("data-node")
        assert node is not None
        states = tab.locator("#queues tbody tr[data-queue] .state .pill")
        before = dict(
            zip(
                tab.locator("#queues tbody tr").evaluate_all(
                    "rows => rows.map(r => r.dataset.queue)"
                ),
                states.all_inner_texts(),
                strict=True,
            )
        )
        assert before["tier.fast"] == "running"
        _confirm_with_keyboard(tab, f"Drain {node}", f"Yes, drain {node}")
        assert f"Worker {node} draining" in tab.locator("#flash").inner_text()
        # The worker's queues have nobody taking their tasks: not green "running".
        for queue in ("ladder", "tier.fast", "callbacks"):
            pill = tab.locator(f"#queue-{queue.replace('.', chr(92) + '.')} .state .pill")
            assert pill.inner_text() in ("drained", "draining"), queue
            assert "completed" not in (pill.get_attribute("class") or "")
        shots(tab, SHOTS, "console-queues-drained")
        said_once(tab, f"Worker {node} draining")
        tab.get_by_role("button", name=f"Undrain {node}").focus()
        with tab.expect_navigation():
            tab.keyboard.press("Enter")
        said_once(tab, f"Worker {node} undrained")
        assert tab.locator("#queue-tier\\.fast .state").inner_text().strip() == "running"


def test_activate_and_roll_back_ask_say_and_the_button_is_readable(
    console: Console, browser: Any
) -> None:
    name = f"flip-{uuid.uuid4().hex[:6]}"
    for version in (1, 2):
        config = {"schema": {**SCHEMA, "title": f"v{version}"}}
        make_policy(
            console, {"name": name, "ladders": {"json": [{"tier": "schema", "config": config}]}}
        )
    path = f"/console/policies/{name}"
    with operator_tab(browser, console.service.base_url, path, console.operator) as tab:
        button = tab.locator("#rollback")
        assert button.inner_text().startswith("Roll back to v1")
        contrast = button.evaluate(CONTRAST_JS)
        assert contrast >= 4.5, f"roll back button contrast {contrast:.2f}:1"
        shots(tab, SHOTS, "console-policy-rollback-button")
        _confirm_with_keyboard(tab, "Roll back to v1", "Yes, roll back to v1")
        assert tab.locator("#active-version").inner_text() == "v1 active"
        assert f"{name} rolled back from v2 to v1" in tab.locator("#flash").inner_text()
        shots(tab, SHOTS, "console-flash-rollback")
        said_once(tab, "rolled back from v2 to v1")
        tab.get_by_role("button", name="Activate v2").focus()
        with tab.expect_navigation():
            tab.keyboard.press("Enter")
        shots(tab, SHOTS, "console-confirm-activate")
        assert tab.evaluate("document.activeElement.textContent.trim()") == "Yes, activate v2"
        with tab.expect_navigation():
            tab.keyboard.press("Enter")
        assert tab.locator("#active-version").inner_text() == "v2 active"
        said_once(tab, f"v2 of {name} is active (was v1)")
    with console.service.client() as client:
        assert client.get(f"/v1/policies/{name}").json()["active_version"] == 2


def _answer(console: Console, reviewer: str, queue: str, n: int) -> None:
    with console.service.client(api_key=console.service.create_key(reviewer, "reviewer")) as c:
        for _ in range(n):
            lease = c.post(f"/v1/review/queues/{queue}/next")
            assert lease.status_code == 200, lease.text
            time.sleep(0.3)  # people take a while
            submitted = c.post(
                f"/v1/review/leases/{lease.json()['lease_id']}/submit",
                json={"values": {"verdict": "good"}},
                headers={"Idempotency-Key": uuid.uuid4().hex},
            )
            assert submitted.status_code == 204, submitted.text


def test_overview_bars_review_time_oldest_waiting_and_reviewers_pace(
    console: Console, browser: Any
) -> None:
    queue = f"people-{uuid.uuid4().hex[:6]}"
    gate = "verdicts['schema'].status == 'passed'"
    human = {"tier": "human", "gate": gate, "config": {"queue": queue, "rubric": RUBRIC}}
    schema = {"tier": "schema", "config": {"schema": SCHEMA}}
    make_policy(console, {"name": queue, "ladders": {"json": [schema, human]}})
    # 9 tool calls, 7 of them valid: 7 of 9 (77.8 %) climb to people.
    items = [{"kind": "json", "payload": {"tool": f"t{i}"}} for i in range(7)]
    items += [{"kind": "json", "payload": {"no": i}} for i in range(2)]
    with console.service.client() as client:
        posted = client.post("/v1/rewards", json={"policy": queue, "items": items})
        assert posted.status_code == 202, posted.text
        job = f"/v1/jobs/{posted.json()['id']}"
        until(
            lambda: sum(i["state"] == "deferred" for i in client.get(job).json()["items"]) == 7,
            what="seven items waiting for people",
        )
    reviewer = f"rev-{uuid.uuid4().hex[:6]}"
    _answer(console, reviewer, queue, 3)  # four still wait for people
    with console.service.client() as client:
        data = client.get("/v1/console/overview?window=1h").json()
        reviewers = {r["reviewer"]: r for r in client.get("/v1/console/reviewers").json()[
            "reviewers"]}  # fmt: skip
    ladder = {(s["policy"], s["tier"]): s for s in data["ladder"]}
    assert ladder[(queue, "human")]["escalation_rate"] == pytest.approx(7 / 9)
    human_tier = next(t for t in data["tiers"] if t["tier"] == "human")
    assert human_tier["review_p50_s"] >= 0.3
    assert data["oldest_waiting_for"] == "people"

    with operator_tab(browser, console.service.base_url, "/console", console.operator) as tab:
        tab.wait_for_selector("main[data-loaded=true]")
        # Each escalation bar is as long as its share of the same track: 77.8 % is not 100 %.
        rows = tab.locator("#ladder tbody tr").filter(has_text=queue)
        widths = {
            cells[2]: (cells[4], width)
            for cells, width in zip(
                [rows.nth(i).locator("td").all_inner_texts() for i in range(rows.count())],
                rows.locator(".hbar").evaluate_all(
                    "bars => bars.map(b => b.getBoundingClientRect().width)"),
                strict=True,
            )
        }  # fmt: skip
        assert widths["human"][0] == "77.8%"
        assert widths["human"][1] / widths["schema"][1] == pytest.approx(7 / 9, abs=0.02)
        track = rows.first.locator(".bar-track").evaluate("t => t.getBoundingClientRect().width")
        assert widths["schema"][1] == pytest.approx(track, abs=1)
        # People's tier shows their review time, not the verdicts' ~0 ms.
        cells = tab.locator("#tiers tbody tr").filter(has_text="human").locator("td")
        p50 = cells.nth(3).inner_text()
        assert p50.endswith(" review"), p50
        assert not p50.startswith("0.0 ms"), p50
        assert p50 == f"{human_tier['review_p50_s']:.1f} s review"
        # Items wait for people: the oldest waiting is theirs, not "none".
        assert tab.locator("#kpi-oldest").inner_text() != "none"
        assert tab.locator("#kpi-oldest-for").text_content() == " (for people)"
        shots(tab, SHOTS, "console-overview-people")

        # The reviewers' pace: answers in the last hour, and per hour while reviewing.
        tab.goto(f"{console.service.base_url}/console/reviewers")
        row = tab.locator(f"#reviewers tr[data-reviewer='{reviewer}']")
        assert row.locator(".answered-1h").inner_text() == "3"
        pace = reviewers[reviewer]["per_hour_active"]
        assert pace is not None
        assert pace > 100  # three answers a second or so apart
        assert row.locator(".per-hour").inner_text() == f"{pace:.1f}"
        assert row.locator(".per-hour").inner_text() != f"{3 / 24:.2f}"
        assert "gap of more than 15 minutes" in tab.locator("#per-hour-note").inner_text()
        shots(tab, SHOTS, "console-reviewers-pace")


def _keep(client: httpx.Client, response: httpx.Response) -> None:
    """Keep the response's cookies (httpx sends no `Secure` cookie over plain http; a browser
    does to 127.0.0.1)."""
    for name, value in response.cookies.items():
        client.cookies.set(name, value)


def _token(client: httpx.Client, path: str) -> str:
    page = client.get(path)
    assert page.status_code == 200, page.text
    _keep(client, page)
    if '<meta name="csrf-token" content="' in page.text:
        return page.text.split('<meta name="csrf-token" content="')[1].split('"')[0]
    return page.text.split('name="csrf_token" value="')[1].split('"')[0]


def test_a_flash_cookie_from_another_session_is_not_shown(console: Console) -> None:
    """The message is bound to the session it was made for: a copied cookie says nothing."""
    base = console.service.base_url
    sessions = []
    for _ in range(2):
        client = httpx.Client(base_url=base, timeout=30, follow_redirects=False)
        form = {"username": console.operator, "password": OPERATOR_PASSWORD, "next": "/console"}
        signed = client.post("/signin", data={**form, "csrf_token": _token(client, "/signin")})
        assert signed.status_code in (302, 303), signed.text
        _keep(client, signed)
        sessions.append(client)
    first, second = sessions
    try:
        token = _token(first, "/console/queues")
        paused = first.post("/console/queues/tier.fast/pause", data={"csrf_token": token})
        assert paused.status_code == 303, paused.text
        cookie = paused.cookies["vs_flash"]
        second.cookies.set("vs_flash", cookie)
        assert "Queue tier.fast paused" not in second.get("/console/queues").text
        first.cookies.set("vs_flash", cookie)
        assert "Queue tier.fast paused" in first.get("/console/queues").text
    finally:
        for client in sessions:
            client.close()
