"""An operator opens the console in a real browser (Playwright + Debian Chromium) and reads the
same numbers the API gives; the page is usable with the keyboard and fetches nothing off-site."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_support import Console, operator_tab


@pytest.fixture(scope="module")
def console(counted_console: Console) -> Console:
    """The console nothing else adds to: these tests count everything it holds."""
    return counted_console


@pytest.fixture
def page(console: Console, browser: Any) -> Iterator[Any]:
    """A 1440x900 tab signed in as the operator, through the redirect to /signin."""
    with operator_tab(browser, console.service.base_url, "/console", console.operator) as tab:
        yield tab


def _cells(page: Any, table: str) -> list[list[str]]:
    rows = page.locator(f"#{table} tbody tr")
    return [
        [c.strip() for c in rows.nth(i).locator("td").all_inner_texts()]
        for i in range(rows.count())
    ]


def test_overview_shows_the_apis_numbers(console: Console, page: Any, tmp_path: Path) -> None:
    errors: list[str] = []  # a CSP violation is logged as an error
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.reload()
    page.wait_for_selector("main[data-loaded=true]")
    items = [item for job in console.jobs for item in job["items"]]
    verdicts = [v for item in items for v in item["verdicts"]]
    statuses = Counter(i["reward"]["status"] for i in items)
    assert page.locator("#kpi-items").inner_text() == str(len(items))
    assert page.locator("#kpi-scored").inner_text() == str(statuses["scored"])
    assert page.locator("#kpi-infra").inner_text() == str(statuses["infra_error"])
    hit_rate = sum(v["cached"] for v in verdicts) / len(verdicts)
    assert page.locator("#kpi-cache").inner_text() == f"{100 * hit_rate:.1f}%"
    assert page.locator("#kpi-oldest").inner_text() == "none"
    total = sum(i["reward"]["cost"]["cost_units"] for i in items)
    assert page.locator("#kpi-cost").inner_text() == f"{total:,.3f}".rstrip("0").rstrip(".")
    shown = {row[0]: int(row[1]) for row in _cells(page, "rewards")}
    assert shown == dict(statuses)
    tiers = {row[0]: row for row in _cells(page, "tiers")}
    per_tier = Counter(v["tier"] for v in verdicts)
    assert {t: int(row[1]) for t, row in tiers.items()} == dict(per_tier)
    cached = Counter(v["tier"] for v in verdicts if v["cached"])
    assert {t: int(row[2]) for t, row in tiers.items()} == {t: cached[t] for t in tiers}
    # The charts are Chart.js charts (the vendored one) holding the API's numbers: the
    # items-per-minute columns add up to the items, one dataset per kind.
    rate = page.evaluate(
        "() => Chart.getChart(document.querySelector('#chart-rate canvas')).data.datasets"
        ".map(d => [d.label, d.data.reduce((a, b) => a + b, 0)])"
    )
    assert dict(rate) == dict(Counter(i["kind"] for i in items))
    assert page.locator("#chart-rewards canvas").get_attribute("aria-label") == ", ".join(
        f"{s} {n}" for s, n in sorted(statuses.items())
    )
    assert errors == []
    page.screenshot(path=str(tmp_path / "console-overview.png"), full_page=True)


def test_keyboard_moves_through_the_windows(console: Console, page: Any) -> None:
    page.wait_for_selector("main[data-loaded=true]")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    seen = []
    # Past the brand and the console's nav links (one per page), then the windows.
    for _ in range(16):
        page.keyboard.press("Tab")
        seen.append(page.evaluate("document.activeElement.textContent.trim()"))
        if seen[-1] == "Last 24h":
            break
    assert seen[-1] == "Last 24h", seen
    page.keyboard.press("Enter")
    page.wait_for_url("**/console?window=24h")
    page.wait_for_selector("main[data-loaded=true]")
    assert page.locator(".windows a[aria-current]").inner_text() == "Last 24h"
    assert page.locator("#kpi-items").inner_text() == str(
        sum(len(j["items"]) for j in console.jobs)
    )


def test_job_page_shows_the_apis_numbers(console: Console, page: Any) -> None:
    job = console.jobs[0]
    page.goto(f"{console.service.base_url}/console/jobs")
    page.get_by_label("Principal").fill("trainer-a")
    page.get_by_label("Principal").press("Enter")  # the search form, without a mouse
    page.wait_for_url("**/console/jobs?principal=trainer-a*")
    assert page.locator("#jobs tbody tr").count() == 1
    page.get_by_role("link", name=job["id"]).focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/console/jobs/{job['id']}")
    assert page.locator("#job-status").inner_text() == "completed"
    assert page.locator("#job-done").inner_text() == f"{job['n_done']}/{job['n_items']}"
    assert page.get_by_role("button", name="Cancel job").count() == 0  # finished: nothing to cancel
    rows = _cells(page, "items")
    assert len(rows) == len(job["items"])
    for item, row in zip(job["items"], rows, strict=True):
        assert row[1] == item["kind"]
        assert row[2].split("\n")[0] == item["reward"]["status"]
        assert row[3] == f"{item['reward']['value']:.4f}"
        assert row[6] == f"{item['reward']['cost']['cost_units']:.3f}"
        for verdict in item["verdicts"]:
            assert f"{verdict['tier']}: {verdict['status']}" in row[5]
    total = sum(i["reward"]["cost"]["cost_units"] for i in job["items"])
    assert page.locator("#job-cost").inner_text() == f"{total:.3f}"
