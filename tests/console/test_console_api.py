"""The console's JSON (what its pages draw) agrees with the API's own answers about the jobs."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from console_support import Console


def _items(console: Console) -> list[dict[str, Any]]:
    return [item for job in console.jobs for item in job["items"]]


def _verdicts(console: Console) -> list[dict[str, Any]]:
    return [v for item in _items(console) for v in item["verdicts"]]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@pytest.fixture(scope="module")
def console(counted_console: Console) -> Console:
    """The console nothing else adds to: these tests count everything it holds."""
    return counted_console


@pytest.fixture(scope="module")
def overview(console: Console) -> dict[str, Any]:
    with console.service.client() as client:
        answer = client.get("/v1/console/overview", params={"window": "1h"})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_items_and_rewards_match_the_jobs(console: Console, overview: dict[str, Any]) -> None:
    items = _items(console)
    assert overview["items"] == len(items) == 10
    assert overview["rewards_by_status"] == dict(Counter(i["reward"]["status"] for i in items))
    per_kind: Counter[str] = Counter()
    for rate in overview["items_per_minute"]:
        per_kind[rate["kind"]] += rate["items"]
    assert per_kind == Counter(i["kind"] for i in items)


def test_tiers_match_the_verdicts(console: Console, overview: dict[str, Any]) -> None:
    verdicts = _verdicts(console)
    tiers = {t["tier"]: t for t in overview["tiers"]}
    assert {t: s["verdicts"] for t, s in tiers.items()} == dict(
        Counter(v["tier"] for v in verdicts)
    )
    cached = Counter(v["tier"] for v in verdicts if v["cached"])
    assert {t: s["cached"] for t, s in tiers.items()} == {t: cached.get(t, 0) for t in tiers}
    # The second trainer's three valid molecules came from the cache (its broken ring and its
    # tool call differ from the first trainer's): 3 of the 10 verdicts.
    assert overview["cache_hit_rate"] == pytest.approx(sum(cached.values()) / len(verdicts))
    assert sum(cached.values()) == 3
    walls = [v["cost"]["wall_s"] for v in verdicts if v["tier"] == "chem.fast" and not v["cached"]]
    assert tiers["chem.fast"]["p50_s"] == pytest.approx(_percentile(walls, 0.5), rel=1e-6)
    assert tiers["chem.fast"]["p95_s"] == pytest.approx(_percentile(walls, 0.95), rel=1e-6)


def test_costs_match_the_rewards(console: Console, overview: dict[str, Any]) -> None:
    by_principal = {
        principal: sum(i["reward"]["cost"]["cost_units"] for i in job["items"])
        for principal, job in zip(console.principals, console.jobs, strict=True)
    }
    assert overview["cost_by_principal"] == pytest.approx(by_principal)
    total = sum(by_principal.values())
    assert overview["total_cost_units"] == pytest.approx(total)
    assert sum(t["cost_units"] for t in overview["tiers"]) == pytest.approx(total)


def test_escalation_per_ladder_step(console: Console, overview: dict[str, Any]) -> None:
    reached: Counter[tuple[str, str]] = Counter()
    for item in _items(console):
        for tier in {v["tier"] for v in item["verdicts"]}:
            reached[(item["kind"], tier)] += 1
    steps = {(s["kind"], s["tier"]): s for s in overview["ladder"]}
    assert {k: s["items"] for k, s in steps.items()} == dict(reached)
    assert all(s["policy"] == "default" for s in overview["ladder"])
    # Every molecule and every tool call met the first tier of its ladder.
    assert steps[("molecule", "chem.fast")]["escalation_rate"] == 1.0
    assert steps[("json", "schema")]["escalation_rate"] == 1.0


def test_queues_match_the_tiers_endpoint(console: Console, overview: dict[str, Any]) -> None:
    with console.service.client() as client:
        tiers = client.get("/v1/tiers").json()
    expected = {t["queue"]: (t["queue_depth"], t["workers"]) for t in tiers}
    assert {q["queue"]: (q["depth"], q["workers"]) for q in overview["queues"]} == expected
    assert dict(expected)["tier.fast"] == (0, 1)  # the fixture's worker, idle
    assert overview["oldest_waiting_s"] is None  # nothing waits: both jobs are done


def test_history_is_in_the_window_and_not_before(console: Console) -> None:
    with console.service.client() as client:
        week = client.get("/v1/console/overview", params={"window": "7d"}).json()
        bad = client.get("/v1/console/overview", params={"window": "2h"})
    assert week["items"] == 10  # the same jobs, seen over a longer window
    assert bad.status_code == 422
    assert "window" in bad.json()["message"]


def test_only_operators_see_the_console(console: Console) -> None:
    trainer = console.service.create_key("console-trainer", "trainer")
    with console.service.client(api_key=trainer) as client:
        assert client.get("/v1/console/overview").status_code == 403
    with console.service.client(api_key="") as client:
        assert client.get("/v1/console/overview").status_code == 401
        page = client.get("/console", headers={"Accept": "text/html"})
    assert page.status_code == 303
    assert page.headers["location"] == "/signin?next=/console"
