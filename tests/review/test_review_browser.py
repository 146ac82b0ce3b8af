"""Reviewers judge items in the web app with the keyboard alone (Playwright + Debian Chromium),
against a live service: the trainer's pending rewards become scored."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from review_page_support import HOSTILE, review_policy, sign_in, submit_job, wait_for_task
from support import Service, fresh_molecules, poll_job


@pytest.fixture
def page(live_service: Service, browser: Any, reviewer: str) -> Iterator[Any]:
    """A tab signed in as a new reviewer; it must fetch nothing off-site nor throw."""
    context, tab = sign_in(browser, live_service.base_url, reviewer)
    offsite: list[str] = []
    tab.on("request", lambda r: offsite.append(r.url) if "127.0.0.1" not in r.url else None)
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    yield tab
    context.close()
    assert offsite == []
    assert errors == []


def _job(service: Service, location: str) -> dict[str, Any]:
    with service.client() as client:
        return poll_job(client, location, timeout=30)


MOLECULE_RUBRIC = {
    "dimensions": [
        {"name": "makeable", "type": "score", "min": 1, "max": 5},
        {"name": "decision", "type": "label", "labels": ["make", "maybe", "drop"]},
    ]
}


def test_judge_molecules_with_hotkeys_only(live_service: Service, page: Any) -> None:
    queue = f"mol-{uuid.uuid4().hex[:8]}"
    # Molecules of this test alone: no cached reward can answer for people.
    chain = fresh_molecules(1)[0]
    items = [
        {"kind": "molecule", "payload": {"smiles": f"{chain}C(=O)O"}},
        {"kind": "molecule", "payload": {"smiles": f"{chain}N"}},
    ]
    location = submit_job(
        live_service, review_policy("molecule", queue, MOLECULE_RUBRIC, "chem.fast"), items
    )
    with live_service.client() as client:
        pending = client.get(location).json()
    assert {i["reward"]["status"] for i in pending["items"] if i["reward"]} <= {"pending"}

    wait_for_task(page, live_service.base_url, queue)
    # The molecule is drawn, with the cheaper tier's verdict and its components beside it.
    assert page.locator("img.mol").count() == 1
    assert page.locator(".verdict .tier").first.inner_text() == "chem.fast"
    assert page.locator(".components th", has_text="qed").count() == 1
    first_smiles = page.locator("code.smiles").inner_text()
    page.keyboard.press("4")  # makeable: 4; then the next dimension is current
    page.keyboard.press("1")  # decision: make
    assert page.locator("fieldset[data-dim=makeable] input:checked").input_value() == "4"
    page.evaluate("window.stillThisDocument = true")
    # A reviewer takes seconds over a task: by then the next one is preloaded (on a loaded CI
    # machine the preload took over the page's 3 s wait once, and the page loaded it anew).
    page.wait_for_selector("main.task-layout[data-next=ready]", timeout=30_000)
    page.keyboard.press("Control+Enter")
    # The next task comes up (preloaded while the first was judged): the other molecule.
    page.wait_for_function(
        "s => document.querySelector('code.smiles')?.textContent !== s", arg=first_smiles
    )
    second = page.locator("code.smiles").inner_text()
    # Shown from the preloaded page, without loading a new document; its own address.
    assert page.evaluate("window.stillThisDocument") is True
    assert "/review/leases/" in page.url
    assert {first_smiles, second} == {i["payload"]["smiles"] for i in items}
    page.keyboard.press("2")
    page.keyboard.press("3")  # decision: drop
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("text=No more tasks")

    job = _job(live_service, location)
    assert job["status"] == "completed"
    assert all(i["reward"]["status"] == "scored" for i in job["items"])
    assert all(i["reward"]["fidelity"] == "human" for i in job["items"])
    values = sorted(i["reward"]["value"] for i in job["items"])
    assert values == pytest.approx([0.25, 0.75])  # scores 2 and 4 on 1..5, as 0..1

    page.goto(f"{live_service.base_url}/review")
    assert page.locator("#done-today").inner_text() == "2"


def test_shortcuts_are_off_while_typing_and_hostile_text_stays_text(
    live_service: Service, page: Any
) -> None:
    queue = f"txt-{uuid.uuid4().hex[:8]}"
    rubric = {"dimensions": [{"name": "helpful", "type": "score", "min": 1, "max": 3}]}
    text = f"Answer {uuid.uuid4().hex}: {HOSTILE}"
    item = {"kind": "text", "payload": {"text": text}}
    location = submit_job(live_service, review_policy("text", queue, rubric, None), [item])
    wait_for_task(page, live_service.base_url, queue)
    # Payload and guidelines are shown as the text they are; none of it ran.
    assert page.locator(".item .text").inner_text() == text
    assert HOSTILE in page.locator(".guidelines").inner_text()
    assert page.evaluate("window.pwned") is None
    assert page.locator("script").count() == 1  # the page's own script only
    url = page.url

    page.get_by_label("Comment").focus()
    page.keyboard.type("1 s ? 2")  # hotkeys, but typed into the comment
    assert page.get_by_label("Comment").input_value() == "1 s ? 2"
    assert page.locator("input[type=radio]:checked").count() == 0
    assert not page.locator("#shortcuts").is_visible()
    assert page.url == url  # not skipped

    page.keyboard.press("Shift+Tab")  # out of the comment, back to the rubric
    page.keyboard.press("?")
    assert page.locator("#shortcuts").is_visible()
    page.keyboard.press("Escape")
    page.keyboard.press("3")
    # A network blip: the first submit reaches the server but its answer is lost on the way
    # back. The page sends it again with the same Idempotency-Key: one answer is recorded.
    keys: list[str] = []

    def drop_answer(route: Any) -> None:
        keys.append(route.request.headers["idempotency-key"])
        if len(keys) > 1:
            route.continue_()
            return
        route.fetch()  # the server records the answer...
        route.abort("connectionreset")  # ...and the page never hears back

    page.route("**/v1/review/leases/*/submit", drop_answer)
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("text=No more tasks")
    assert len(keys) == 2
    assert keys[0] == keys[1]
    job = _job(live_service, location)
    (item,) = job["items"]
    assert item["reward"]["status"] == "scored"
    assert item["reward"]["value"] == pytest.approx(1.0)
    with httpx.Client(base_url=live_service.base_url, headers=live_service.auth_headers) as api:
        exported = api.get("/v1/review/export.jsonl", params={"queue": queue})
    assert exported.status_code == 200, exported.text
    answers = [line for line in exported.text.splitlines() if line.strip()]
    assert len(answers) == 1
    assert '"1 s ? 2"' in answers[0]


def test_judge_a_trajectory_step_by_step_with_hotkeys(live_service: Service, page: Any) -> None:
    queue = f"traj-{uuid.uuid4().hex[:8]}"
    rubric = {
        "dimensions": [
            {"name": "sensible", "type": "score", "min": 1, "max": 3},
            {"name": "safe", "type": "label", "labels": ["yes", "no"]},
        ],
        "per_step": True,  # the trajectory is judged as one task, each step in it
    }
    schema = {"schema": {"type": "object", "required": ["tool", "args"]}}
    marker = uuid.uuid4().hex

    def call(tool: str, **args: str) -> dict[str, Any]:
        return {"kind": "json", "payload": {"tool": tool, "args": args}, "reference": schema}

    trajectory = {
        "kind": "trajectory",
        "steps": [
            {"action": call("search", q=f"aspirin {marker}"), "observation": "3 results"},
            {"action": call("open", url=f"https://example.org/{marker}"), "observation": "200"},
        ],
        "final_answer": call("answer", text=f"acetylsalicylic acid {marker}"),
    }
    location = submit_job(
        live_service, review_policy("json", queue, rubric, "schema"), [trajectory]
    )
    page.goto(f"{live_service.base_url}/review")
    wait_for_task(page, live_service.base_url, queue)
    # One task: the whole trajectory, step by step, each step with its lower tier's verdict.
    assert page.locator("h1 .kind").inner_text() == "trajectory"
    assert page.locator("section.step").count() == 2
    assert page.locator("#step-0").is_visible()
    assert not page.locator("#step-1").is_visible()
    assert marker in page.locator("#step-0").inner_text()
    assert page.locator("#step-0 .step-verdicts .tier").inner_text() == "schema"
    assert marker in page.locator(".final").inner_text()
    page.keyboard.press("3")  # step 1 sensible: 3
    page.keyboard.press("1")  # step 1 safe: yes -> step 1 is done: on to step 2 by itself
    assert page.locator("#step-1").is_visible()
    assert not page.locator("#step-0").is_visible()
    assert "example.org" in page.locator("#step-1").inner_text()
    focused = "document.activeElement.closest('fieldset').dataset"
    assert page.evaluate(f"[{focused}.step, {focused}.dim]") == ["1", "sensible"]
    page.keyboard.press("2")  # step 2 sensible: 2
    page.keyboard.press("1")  # step 2 safe: yes -> the last step: on to the whole trajectory
    assert page.evaluate(f"{focused}.step") is None
    page.keyboard.press("3")  # whole trajectory sensible: 3
    page.keyboard.press("2")  # whole trajectory safe: no
    page.keyboard.press("ArrowLeft")  # back to step 1: its answers are kept
    assert page.locator("#step-0").is_visible()
    assert (
        page.locator("fieldset[data-step='0'][data-dim=safe] input:checked").input_value() == "yes"
    )
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("text=No more tasks")

    job = _job(live_service, location)
    assert job["status"] == "completed"
    (item,) = job["items"]
    assert item["reward"]["status"] == "scored"
    steps = {s["index"]: s["reward"]["value"] for s in item["steps"]}
    # step 1: 3/3 -> 1.0, step 2: 2/3 -> 0.5, the outcome (whole trajectory) 3/3 -> 1.0
    assert steps == pytest.approx({0: 1.0, 1: 0.5, 2: 1.0})
    assert all(s["reward"]["fidelity"] == "human" for s in item["steps"])
    with httpx.Client(base_url=live_service.base_url, headers=live_service.auth_headers) as api:
        exported = api.get("/v1/review/export.jsonl", params={"queue": queue})
    (answer,) = [json.loads(line) for line in exported.text.splitlines() if line.strip()]
    assert answer["values"] == {"sensible": 3, "safe": "no"}
    assert answer["steps"] == [{"sensible": 3, "safe": "yes"}, {"sensible": 2, "safe": "yes"}]


def test_the_form_works_without_javascript(
    live_service: Service, browser: Any, reviewer: str
) -> None:
    queue = f"nojs-{uuid.uuid4().hex[:8]}"
    rubric = {
        "dimensions": [
            {"name": "clear", "type": "score", "min": 1, "max": 3},
            {"name": "fluent", "type": "label", "labels": ["yes", "no"]},
        ]
    }
    item = {"kind": "text", "payload": {"text": f"Bonjour {uuid.uuid4().hex}"}}
    location = submit_job(live_service, review_policy("text", queue, rubric, None), [item])
    context, tab = sign_in(browser, live_service.base_url, reviewer, java_script_enabled=False)
    wait_for_task(tab, live_service.base_url, queue)
    tab.get_by_role("radio", name="2", exact=True).check()
    tab.get_by_role("radio", name="yes", exact=True).check()
    tab.get_by_label("Comment").fill("plain form")
    with tab.expect_response(lambda r: r.request.method == "POST") as posted:
        tab.get_by_role("button", name="Submit").click()
    assert posted.value.status == 303  # recorded, then on to the queue's next task
    tab.wait_for_selector("text=No more tasks")
    context.close()
    job = _job(live_service, location)
    reward = job["items"][0]["reward"]
    assert reward["status"] == "scored", reward
    assert reward["value"] == pytest.approx(0.5)
    assert job["items"][0]["verdicts"][-1]["components"]["fluent.yes"] == 1.0


def test_an_expired_lease_says_so(live_service: Service, page: Any) -> None:
    queue = f"ttl-{uuid.uuid4().hex[:8]}"
    rubric = {"dimensions": [{"name": "ok", "type": "score", "min": 1, "max": 2}]}
    item = {"kind": "text", "payload": {"text": f"Short-lived {uuid.uuid4().hex}"}}
    submit_job(live_service, review_policy("text", queue, rubric, None, ttl_s=2), [item])
    page.route("**/heartbeat", lambda route: route.abort())  # the page's heartbeats never arrive
    page.route("**/queues/*/next", lambda route: route.abort())  # and it preloads nothing
    wait_for_task(page, live_service.base_url, queue)
    page.wait_for_timeout(3000)
    page.keyboard.press("2")  # the draft save finds the lease expired
    banner = page.get_by_role("alert")
    banner.wait_for()
    assert "expired" in banner.inner_text()
    assert "not recorded" in banner.inner_text()
    assert page.locator("#submit").is_disabled()
    page.get_by_role("link", name="Take the next task").click()
    page.wait_for_selector("#answer")  # the same task, back in the queue and leased again
    assert "Short-lived" in page.locator(".item .text").inner_text()


def test_drafts_survive_a_reload_online_and_offline(live_service: Service, page: Any) -> None:
    queue = f"draft-{uuid.uuid4().hex[:8]}"
    rubric = {
        "dimensions": [
            {"name": "clear", "type": "score", "min": 1, "max": 4},
            {"name": "tone", "type": "label", "labels": ["kind", "neutral", "rude"]},
        ]
    }
    item = {"kind": "text", "payload": {"text": f"Draft me {uuid.uuid4().hex}"}}
    submit_job(live_service, review_policy("text", queue, rubric, None), [item])
    wait_for_task(page, live_service.base_url, queue)
    page.keyboard.press("3")
    page.get_by_label("Comment").fill("half done")
    page.wait_for_selector("#save-state:has-text('Draft saved')")
    page.reload()  # the server kept the draft
    assert page.locator("fieldset[data-dim=clear] input:checked").input_value() == "3"
    assert page.get_by_label("Comment").input_value() == "half done"

    page.route("**/draft", lambda route: route.abort())  # offline for drafts from now on
    page.locator("fieldset[data-dim=tone]").get_by_role("radio", name="rude").focus()
    page.keyboard.press("3")
    page.wait_for_selector("#save-state:has-text('kept in this browser')")
    page.reload()  # the browser kept what the server could not get
    assert page.locator("fieldset[data-dim=tone] input:checked").input_value() == "rude"
    assert page.locator("fieldset[data-dim=clear] input:checked").input_value() == "3"
