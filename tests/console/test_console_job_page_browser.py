"""The console's job page in a real browser (Playwright + Debian Chromium): a trajectory's row
shows its steps' verdicts, step rewards and cost (the rows add up to the job's cost), and a
job an operator cancelled says "cancelled", names the operator and is found by the status
filter. A service of this module's own: the console's shared one counts its jobs exactly."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_support import (
    Console,
    make_policy,
    operator_tab,
    private_console,
    scrolls_sideways,
    shots,
)

SCHEMA = {"type": "object", "required": ["tool"], "properties": {"tool": {"type": "string"}}}
SHOTS = Path(os.environ.get("VERIFIER_SCREENSHOTS") or tempfile.mkdtemp(prefix="cjob-shots-"))
RUBRIC = {"dimensions": [{"name": "ok", "type": "score", "min": 1, "max": 2}]}


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with private_console(tmp_path_factory, "cjob") as state:
        yield state


def test_a_trajectory_row_shows_its_steps_rewards_and_cost(console: Console, browser: Any) -> None:
    name = f"traj-{uuid.uuid4().hex[:6]}"
    make_policy(
        console,
        {"name": name, "ladders": {"json": [{"tier": "schema", "config": {"schema": SCHEMA}}]}},
    )
    marker = uuid.uuid4().hex
    trajectory = {
        "kind": "trajectory",
        "steps": [
            {"action": {"kind": "json", "payload": {"tool": "search", "m": marker}}},
            {"action": {"kind": "json", "payload": {"m": marker}}},  # no tool: fails
        ],
        "final_answer": {"kind": "json", "payload": {"tool": "answer", "m": marker}},
    }
    single = {"kind": "json", "payload": {"tool": "alone", "m": marker}}
    with console.service.client() as client:
        answer = client.post(
            "/v1/rewards", json={"policy": name, "items": [trajectory, single], "wait_s": 20}
        )
    assert answer.status_code == 200, answer.text
    job = answer.json()
    reward = job["items"][0]["reward"]
    assert reward["status"] == "scored"
    path = f"/console/jobs/{job['id']}"
    with operator_tab(browser, console.service.base_url, path, console.operator) as tab:
        row = tab.locator("#items tbody tr[data-index='0']")
        assert "no verdict yet" not in row.inner_text()
        steps = row.locator("ol.step-rewards li").all_inner_texts()
        assert steps == [f"step {i}: {v:.4f}" for i, v in enumerate(reward["step_rewards"])] + [
            f"outcome: {reward['outcome_reward']:.4f}"
        ]
        rungs = row.locator("ol.path li").all_inner_texts()
        assert [r.split(" ")[0:2] for r in rungs] == [
            ["step", "0"], ["step", "1"], ["outcome", "schema:"]
        ]  # fmt: skip
        with console.service.client() as client:
            paths = client.get(f"/v1/console/jobs/{job['id']}").json()
        costs = [i["cost_units"] for i in paths["items"]]
        assert costs[0] == reward["cost"]["cost_units"] > 0  # not 0.000
        assert sum(costs) == paths["job"]["cost_units"]  # the rows add up to the job's cost
        shown = tab.locator("#items td.item-cost").all_inner_texts()
        assert shown == [f"{c:.3f}" for c in costs]
        shots(tab, SHOTS, "console-job-trajectory", fits_390=True)
        tab.set_viewport_size({"width": 390, "height": 844})
        # At 390 px a row is a card: nothing scrolls sideways, neither
        # the items' table in its card nor the page, and each value says its column.
        assert tab.evaluate("window.innerWidth") == 390
        assert scrolls_sideways(tab, "#items") == []
        cost = row.locator("td.item-cost")
        label = cost.evaluate("td => getComputedStyle(td, '::before').content")
        assert label == '"Cost units"'


def test_a_cancelled_job_says_so_and_is_found_by_its_status(console: Console, browser: Any) -> None:
    name = f"people-{uuid.uuid4().hex[:6]}"
    human = {"tier": "human", "config": {"queue": name, "rubric": RUBRIC}}
    make_policy(console, {"name": name, "ladders": {"text": [human]}})
    item = {"kind": "text", "payload": {"text": uuid.uuid4().hex}}
    with console.service.client() as client:
        posted = client.post("/v1/rewards", json={"policy": name, "items": [item]})
    assert posted.status_code == 202, posted.text
    job_id = posted.json()["id"]
    path = f"/console/jobs/{job_id}"
    with operator_tab(browser, console.service.base_url, path, console.operator) as tab:
        assert tab.locator("#job-status").inner_text() == "running"
        with tab.expect_navigation():
            tab.get_by_role("button", name="Cancel job").click()
        with tab.expect_navigation():  # the question first
            tab.get_by_role("button", name="Yes, cancel the job").click()
        assert tab.locator("#job-status").inner_text() == "cancelled"
        reason = tab.locator("#items tbody tr .reason").inner_text()
        assert reason.startswith(f"cancelled: by operator {console.operator}")
        shots(tab, SHOTS, "console-job-cancelled", fits_390=True)
        tab.goto(f"{console.service.base_url}/console/jobs?policy={name}")
        tab.get_by_label("Status").select_option("cancelled")
        with tab.expect_navigation():
            tab.get_by_role("button", name="Search").click()
        rows = tab.locator("#jobs tbody tr")
        assert rows.count() == 1
        assert job_id in rows.inner_text()
        assert "cancelled" in rows.inner_text()
