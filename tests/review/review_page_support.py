"""What the review page's browser tests share: the reviewers' password, a new reviewer, a tab
signed in as one, a policy that sends items to people, a job of it, and waiting for its task
to reach the queue."""

from __future__ import annotations

import uuid
from typing import Any

from support import Service

PASSWORD = "correct horse battery staple"
HOSTILE = "<script>window.pwned = 1</script><img src=x onerror='window.pwned = 2'>"
#: A rubric of two dimensions: a score (1-4) and a label.
CLEAR_AND_TONE = {
    "dimensions": [
        {"name": "clear", "type": "score", "min": 1, "max": 4},
        {"name": "tone", "type": "label", "labels": ["kind", "neutral", "rude"]},
    ]
}


def new_reviewer(service: Service, prefix: str = "rev") -> str:
    """A reviewer (a person with PASSWORD) of a name no other test uses."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    made = service.cli("users", "create", "--role", "reviewer", name, stdin=PASSWORD + "\n")
    assert made.returncode == 0, made.stderr
    return name


def sign_in(browser: Any, base_url: str, reviewer: str, **options: Any) -> tuple[Any, Any]:
    """A 1280x800 browser context signed in as `reviewer` (through the redirect to /signin)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, **options)
    tab = context.new_page()
    tab.goto(f"{base_url}/review")
    tab.wait_for_url("**/signin?next=/review")  # not signed in: sent to sign in first
    tab.get_by_label("Username").fill(reviewer)
    tab.get_by_label("Password").fill(PASSWORD)
    tab.get_by_role("button", name="Sign in").click()
    tab.wait_for_url("**/review")
    return context, tab


def review_policy(
    kind: str, queue: str, rubric: dict[str, Any], first: str | None, ttl_s: float = 120
) -> dict[str, Any]:
    human = {
        "tier": "human",
        "config": {
            "queue": queue,
            "guidelines": f"Judge **carefully**. {HOSTILE}",
            "rubric": rubric,
            "claim_ttl_s": ttl_s,
        },
    }
    ladder = ([{"tier": first}] if first else []) + [human]
    component = {"name": "people", "tier": "human", "component": "score"}
    return {
        "name": f"review-{queue}",
        "ladders": {kind: ladder},
        "reward": {kind: {"components": [component]}},
    }


def submit_job(service: Service, policy: dict[str, Any], items: list[dict[str, Any]]) -> str:
    with service.client() as client:
        made = client.post("/v1/policies", json={"document": policy})
        assert made.status_code == 201, made.text
        body = {"policy": policy["name"], "items": items}
        posted = client.post("/v1/rewards", json=body)
        assert posted.status_code == 202, posted.text
        return str(posted.headers["location"])


def wait_for_task(page: Any, base_url: str, queue: str) -> None:
    """Open the queue's next task (the ladder hands items to people within a moment)."""
    for _ in range(100):
        page.goto(f"{base_url}/review/{queue}")
        if page.locator("#answer").count():
            return
        page.wait_for_timeout(200)
    raise AssertionError(f"no task reached queue {queue}: {page.content()[:500]}")
