"""An operator does in Chromium what only the JSON API did before: makes a gold item from a task
people were sent and removes it again, decides a task whose reviewers disagreed, and pauses a
reviewer, whose next claim is then refused (and allowed again after Resume). Reviewers answer
through the API with their own keys, as the reviewers' app does."""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_support import Console, operator_tab, said_once, shots

IMG = Path(os.environ.get("VERIFIER_SCREENSHOTS") or tempfile.mkdtemp(prefix="people-shots-"))

RUBRIC = {
    "dimensions": [
        {"name": "verdict", "type": "label", "labels": ["good", "bad"]},
        {"name": "clear", "type": "score", "min": 1, "max": 5},
    ]
}


@dataclass
class People:
    """A review queue of the test's own, two reviewers who answered both its items (agreeing on
    one, not on the other), and the job."""

    console: Console
    queue: str
    reviewers: dict[str, str]  # name -> API key
    job_location: str
    agreed: str  # the texts of the two items
    disputed: str

    def as_reviewer(self, name: str) -> httpx.Client:
        client: httpx.Client = self.console.service.client(api_key=self.reviewers[name])
        return client

    def new_reviewer(self) -> str:
        name = f"ppl-rev-{uuid.uuid4().hex[:6]}"
        self.reviewers[name] = self.console.service.create_key(name, "reviewer")
        return name


def _claim(client: httpx.Client, queue: str, timeout_s: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        got = client.post(f"/v1/review/queues/{queue}/next")
        if got.status_code == 200:
            lease: dict[str, Any] = got.json()
            return lease
        assert got.status_code == 204, got.text
        assert time.monotonic() < deadline, "no task reached the queue"
        time.sleep(0.2)


def _answer(client: httpx.Client, lease: dict[str, Any], values: dict[str, Any]) -> None:
    done = client.post(
        f"/v1/review/leases/{lease['lease_id']}/submit",
        json={"values": values},
        headers={"Idempotency-Key": uuid.uuid4().hex},
    )
    assert done.status_code == 204, done.text


@pytest.fixture(scope="module")
def people(console: Console) -> People:
    service = console.service
    queue = f"ppl-{uuid.uuid4().hex[:8]}"
    policy = {
        "name": f"people-{queue}",
        "ladders": {
            "text": [
                {
                    "tier": "human",
                    "config": {
                        "queue": queue,
                        "guidelines": "Is the sentence good and clear?",
                        "rubric": RUBRIC,
                        "overlap": 2,
                        "gold_rate": 1.0,  # a gold item, when there is one, comes first
                        "claim_ttl_s": 300,
                    },
                }
            ]
        },
        "reward": {"text": {"components": [{"name": "people", "tier": "human"}]}},
    }
    agreed, disputed = f"Agreed {uuid.uuid4().hex}", f"Disputed {uuid.uuid4().hex}"
    with service.client() as admin:
        made = admin.post("/v1/policies", json={"document": policy})
        assert made.status_code == 201, made.text
        items = [{"kind": "text", "payload": {"text": t}} for t in (agreed, disputed)]
        posted = admin.post("/v1/rewards", json={"policy": policy["name"], "items": items})
        assert posted.status_code == 202, posted.text
    state = People(console, queue, {}, str(posted.headers["location"]), agreed, disputed)
    for name, disputed_values in (("ann", ("good", 5)), ("bob", ("bad", 1))):
        name = state.new_reviewer()
        with state.as_reviewer(name) as client:
            for _ in range(2):
                lease = _claim(client, queue)
                text = lease["task"]["payload"]["text"]
                verdict, clear = ("good", 4) if text == agreed else disputed_values
                _answer(client, lease, {"verdict": verdict, "clear": clear})
    return state


@pytest.fixture
def page(console: Console, browser: Any) -> Iterator[Any]:
    path = "/console/people/gold"
    with operator_tab(browser, console.service.base_url, path, console.operator) as tab:
        yield tab


def test_add_a_gold_item_from_a_task_then_remove_it(people: People, page: Any) -> None:
    base = people.console.service.base_url
    page.goto(f"{base}/console/people/gold")
    source = page.locator("#sources tbody tr", has_text=people.agreed[:30])
    assert source.count() == 1
    source.get_by_role("link", name="Make gold").focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**/console/people/gold/new?task=*")
    assert people.agreed in page.locator("#payload").inner_text()
    assert page.locator("#answers li").count() == 2  # what both reviewers said
    page.get_by_label("verdict").select_option("good")
    page.get_by_label("clear").fill("9")  # out of the scale: the form says so, nothing added
    page.get_by_label("clear").evaluate("e => e.removeAttribute('max')")
    page.get_by_role("button", name="Add gold item").click()
    assert "9 is not a score from 1 to 5" in page.locator("#error").inner_text()
    page.get_by_label("clear").fill("4")
    with page.expect_navigation():
        page.get_by_role("button", name="Add gold item").click()
    assert page.url.split("#")[0].endswith("/console/people/gold")  # no note in the address
    row = page.locator("#gold tbody tr", has_text=people.agreed[:30])
    assert row.count() == 1
    assert "verdict: good" in row.inner_text()
    assert "clear: 4" in row.inner_text()
    assert "served" in row.inner_text()
    shots(page, IMG, "console-people-flash-added", fits_390=True)
    said_once(page, "added: reviewers of its queue will be served it")
    shots(page, IMG, "console-people-gold", fits_390=True)
    # A new reviewer's first claim is the gold item (gold_rate 1), the item copied as it was.
    carol = people.new_reviewer()
    with people.as_reviewer(carol) as client:
        lease = _claim(client, people.queue, timeout_s=1)
        assert lease["task"]["payload"] == {"text": people.agreed}
        _answer(client, lease, {"verdict": "good", "clear": 4})
    page.reload()
    cells = row.locator("td").all_inner_texts()
    assert cells[3:5] == ["1", "1"]  # answered once, right once
    # Removed: nobody is served it any more.
    row.get_by_role("button", name="Remove gold item").click()
    page.wait_for_url("**/console/people/gold?confirm=remove*")
    with page.expect_navigation():  # the question first, then the post and the list again
        page.get_by_role("button", name="Yes, remove it").click()
    assert "removed" in row.locator("td").nth(5).inner_text()
    assert "removed: nobody is served it" in page.locator("#flash").inner_text()
    dave = people.new_reviewer()
    with people.as_reviewer(dave) as client:
        assert client.post(f"/v1/review/queues/{people.queue}/next").status_code == 204


def test_decide_a_task_whose_reviewers_disagreed(people: People, page: Any) -> None:
    page.get_by_role("link", name="Adjudication").click()
    page.wait_for_url("**/console/people/adjudication")
    task = page.locator("section.adjudication", has_text=people.disputed[:30])
    assert task.count() == 1
    answers = task.locator("table.answers tbody tr").all_inner_texts()
    said = {" ".join(a.split()).split(" ", 1)[1] for a in answers}  # after the reviewer's name
    assert said == {"good 5", "bad 1"}
    shots(page, IMG, "console-people-adjudication", fits_390=True)
    task.get_by_label("verdict").select_option("good")
    task.get_by_label("clear").evaluate("e => e.removeAttribute('max')")
    task.get_by_label("clear").fill("9")  # off the scale: said next to the form, not decided
    task.get_by_label("Comment").fill("clear enough; the second reviewer misread it")
    task.get_by_role("button", name="Decide").click()
    page.wait_for_selector("#error")
    assert "9 is not a score from 1 to 5" in task.locator("#error").inner_text()
    assert task.get_by_label("verdict").input_value() == "good"  # what was typed is kept
    assert "misread" in task.get_by_label("Comment").input_value()
    task.get_by_label("clear").fill("4")
    with page.expect_navigation():
        task.get_by_role("button", name="Decide").click()
    assert page.url.endswith("/console/people/adjudication")  # no note in the address
    shots(page, IMG, "console-people-flash-decided", fits_390=True)
    said_once(page, "decided: its item is complete")
    assert page.locator("section.adjudication", has_text=people.disputed[:30]).count() == 0
    # The item is complete: its reward is people's (clear 4 on 1..5 -> 0.75).
    deadline = time.monotonic() + 30
    with people.console.service.client() as admin:
        while True:
            job = admin.get(people.job_location).json()
            rewards = {i["index"]: i["reward"] for i in job["items"]}
            if rewards[1] and rewards[1].get("value") is not None:
                break
            assert time.monotonic() < deadline, job
            time.sleep(0.3)
    assert rewards[1]["value"] == pytest.approx(0.75)


def test_pause_a_reviewer_then_her_next_claim_is_refused(people: People, page: Any) -> None:
    page.get_by_role("link", name="Reviewers: pause, resume").click()
    page.wait_for_url("**/console/reviewers")
    ann = next(n for n in people.reviewers if n.startswith("ppl-rev-"))
    row = page.locator(f"#reviewers tr[data-reviewer='{ann}']")
    assert "active" in row.locator("td.state").inner_text()
    row.get_by_role("button", name=f"Pause {ann}").focus()
    with page.expect_navigation():  # the question, its "Yes" button focused
        page.keyboard.press("Enter")
    page.wait_for_selector("#confirm button:focus", timeout=5000)  # autofocus, after load
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "paused" in row.locator("td.state").inner_text()
    assert people.console.operator in row.locator("td.state").inner_text()  # by whom
    assert f"{ann} is paused" in page.locator("#flash").inner_text()
    with people.as_reviewer(ann) as client:
        refused = client.post(f"/v1/review/queues/{people.queue}/next")
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"] == "reviewer_paused"
    shots(page, IMG, "console-reviewers", fits_390=True)
    field = page.get_by_label("Reviewer's name").bounding_box()  # at 1280 px: a name's width
    assert field is not None
    assert 150 <= field["width"] <= 320
    with page.expect_navigation():  # resuming harms nothing: no question
        row.get_by_role("button", name=f"Resume {ann}").click()
    assert "active" in row.locator("td.state").inner_text()
    assert f"{ann} may take tasks again" in page.locator("#flash").inner_text()
    with people.as_reviewer(ann) as client:
        assert client.post(f"/v1/review/queues/{people.queue}/next").status_code in (200, 204)


def test_the_pages_are_for_operators_only(people: People) -> None:
    reviewer = next(iter(people.reviewers))
    with people.as_reviewer(reviewer) as client:
        for path in ("/console/people/gold", "/console/people/adjudication", "/console/reviewers"):
            assert client.get(path).status_code == 403
        form = {"reviewer": reviewer, "action": "resume"}
        posted = client.post("/console/reviewers", data=form)
        assert posted.status_code == 403
