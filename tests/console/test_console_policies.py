"""An operator works on a policy in the console: two versions side by side, a draft whose
errors show at their lines, a replay report (tables and Chart.js charts from the JSON API),
activation and roll back; the API first, then the same in a real browser."""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_support import Console, operator_tab, unique_smiles

ACTIVE = """\
# The test's policy: one cheap tier per kind.
name: {name}
ladders:
  molecule:
    - tier: chem.fast
  json:
    - tier: schema
reward:
  molecule:
    components:
      - name: qed
        tier: chem.fast
        component: qed
    hard_gates:
      - when: "verdicts['chem.fast'].status == 'passed'"
        reason: invalid molecule
  json:
    components:
      - name: schema
        tier: schema
        component: score
"""
#: The draft halves every molecule's QED (linear: 0 -> 0, 2 -> 1); tiers are unchanged.
DRAFT = ACTIVE.replace(
    "        component: qed\n",
    "        component: qed\n        transform:\n          type: linear\n          low: 0.0\n"
    "          high: 2.0\n",
)
#: The draft with a number that is not one (a pydantic error, at its field's line).
BROKEN = DRAFT.replace("high: 2.0", "high: lots")
BROKEN_LINE = 1 + BROKEN.splitlines().index("          high: lots")
#: The draft with a tier that does not exist: three problems, each on its own line.
UNKNOWN_TIER = DRAFT.replace("    - tier: chem.fast\n", "    - tier: chem.nope\n", 1)


@dataclass
class PolicyCase:
    """A policy of the test's own (v1 active) and the job that ran under it."""

    console: Console
    name: str
    operator_key: str
    admin_key: str
    job: dict[str, Any]

    def api(self) -> httpx.Client:
        return self.console.service.client(api_key=self.operator_key)

    def audit(self) -> list[dict[str, Any]]:
        with self.console.service.client(api_key=self.admin_key) as admin:
            answer = admin.get("/v1/audit", params={"limit": 50})
        assert answer.status_code == 200, answer.text
        events: list[dict[str, Any]] = answer.json()
        return events


@pytest.fixture(scope="module")
def case(console: Console) -> PolicyCase:
    service = console.service
    name = f"cpol-{uuid.uuid4().hex[:6]}"
    key = service.create_key(f"cpol-op-{name}", "operator")
    with service.client(api_key=key) as api:
        made = api.post("/v1/policies", json={"text": ACTIVE.format(name=name)})
        assert made.status_code == 201, made.text
    items: list[dict[str, Any]] = [
        {"kind": "molecule", "payload": {"smiles": unique_smiles()}} for _ in range(4)
    ]
    items.append({"kind": "molecule", "payload": {"smiles": "C1CCN"}})  # unclosed ring
    items.append(
        {
            "kind": "json",
            "payload": {"tool": "search", "args": {"q": name}},
            "reference": {"schema": {"type": "object", "required": ["tool", "args"]}},
        }
    )
    trainer = service.create_key(f"cpol-trainer-{name}", "trainer")
    with service.client(api_key=trainer) as client:
        answer = client.post("/v1/rewards", json={"policy": name, "items": items, "wait_s": 30})
    assert answer.status_code == 200, answer.text
    job = answer.json()
    assert job["status"] == "completed"
    admin = service.create_key(f"cpol-admin-{name}", "admin")  # reads the audit trail
    return PolicyCase(console=console, name=name, operator_key=key, admin_key=admin, job=job)


def _store_draft(case: PolicyCase) -> int:
    with case.api() as api:
        made = api.post(
            "/v1/policies", json={"text": DRAFT.format(name=case.name), "activate": False}
        )
    assert made.status_code == 201, made.text
    version: int = made.json()["version"]
    return version


def _rewards(job: dict[str, Any]) -> dict[int, float]:
    return {item["index"]: item["reward"]["value"] for item in job["items"]}


# --- the JSON API ----------------------------------------------------------------------------


def test_the_list_marks_the_active_version(case: PolicyCase) -> None:
    with case.api() as api:
        rows = api.get("/v1/console/policies").json()
        detail = api.get(f"/v1/console/policies/{case.name}").json()
    mine = next(r for r in rows if r["name"] == case.name)
    assert mine["active_version"] == 1
    assert detail["active_version"] == 1
    assert [v["active"] for v in detail["versions"]][:1] == [True]


def test_two_versions_side_by_side(case: PolicyCase) -> None:
    draft = _store_draft(case)
    with case.api() as api:
        diff = api.get(f"/v1/console/policies/{case.name}/diff", params={"a": 1, "b": draft})
    assert diff.status_code == 200, diff.text
    body = diff.json()
    added = [r["right"].strip() for r in body["rows"] if r["kind"] in ("added", "changed")]
    # The identity transform becomes a linear one: its type changes, low and high appear.
    assert "type: linear" in added
    assert "low: 0.0" in added
    assert "high: 2.0" in added
    assert body["added"] == len(added)
    same = [r for r in body["rows"] if r["kind"] == "same"]
    assert any(r["left"].strip() == "tier: chem.fast" for r in same)


def test_a_draft_check_places_each_problem_on_its_line(case: PolicyCase) -> None:
    with case.api() as api:
        check = api.post(
            f"/v1/console/policies/{case.name}/check", json={"text": BROKEN.format(name=case.name)}
        )
        unknown = api.post(
            f"/v1/console/policies/{case.name}/check",
            json={"text": UNKNOWN_TIER.format(name=case.name)},
        )
        wrong_name = api.post(
            f"/v1/console/policies/{case.name}/check", json={"text": DRAFT.format(name="other")}
        )
    assert check.status_code == 200, check.text
    assert check.json()["valid"] is False
    [error] = check.json()["errors"]
    assert error["loc"] == "reward.molecule.components[0].transform.high"
    assert "valid number" in error["msg"]
    assert error["line"] == BROKEN_LINE
    lines = UNKNOWN_TIER.splitlines()
    placed = {e["loc"]: e["line"] for e in unknown.json()["errors"]}
    assert placed == {
        "ladders.molecule[0].tier": 1 + lines.index("    - tier: chem.nope"),
        "reward.molecule.components[0].tier": 1 + lines.index("        tier: chem.fast"),
        "reward.molecule.hard_gates[0].when": 1
        + lines.index("      - when: \"verdicts['chem.fast'].status == 'passed'\""),
    }
    [error] = wrong_name.json()["errors"]
    assert (error["loc"], error["line"]) == ("name", 2)


def test_replay_compares_the_draft_with_the_active_version(case: PolicyCase) -> None:
    draft = _store_draft(case)
    with case.api() as api:
        report = api.get(f"/v1/console/policies/{case.name}/versions/{draft}/replay")
    assert report.status_code == 200, report.text
    body = report.json()
    items = case.job["items"]
    assert body["items"] == len(items)
    assert body["active_version"] == 1
    active = _rewards(case.job)
    halved = {
        i["index"]: active[i["index"]] / 2 if i["kind"] == "molecule" else active[i["index"]]
        for i in items
    }
    assert body["active"]["mean_reward"] == pytest.approx(statistics.mean(active.values()))
    assert body["draft"]["mean_reward"] == pytest.approx(statistics.mean(halved.values()))
    # Same tiers, so the same escalations and cost; halving keeps the molecules' order.
    assert body["draft"]["escalations"] == body["active"]["escalations"]
    assert body["draft"]["escalations"] == {"chem.fast": 5, "schema": 1}
    assert body["draft"]["cost_units"] == body["active"]["cost_units"]
    changed = {c["index"]: c["delta"] for c in body["most_changed"]}
    assert changed == {
        i: pytest.approx(halved[i] - active[i]) for i in active if halved[i] != active[i]
    }


def test_activate_and_roll_back_are_audited(case: PolicyCase) -> None:
    draft = _store_draft(case)
    with case.api() as api:
        activated = api.post(f"/v1/console/policies/{case.name}/versions/{draft}/activate")
        assert activated.status_code == 200, activated.text
        assert activated.json()["active_version"] == draft
        assert activated.json()["rollback_to"] == 1
        rolled = api.post(f"/v1/console/policies/{case.name}/rollback")
        assert rolled.status_code == 200, rolled.text
        assert rolled.json()["active_version"] == 1
        assert api.get(f"/v1/policies/{case.name}").json()["active_version"] == 1
    mine = [(e["action"], e["target"]) for e in case.audit()]
    assert ("policy.activate", f"{case.name}@{draft}") in mine
    assert ("policy.rollback", f"{case.name}@1") in mine


def test_the_json_api_is_for_operators_only(case: PolicyCase) -> None:
    trainer = case.console.service.create_key(f"cpol-t2-{case.name}", "trainer")
    with case.console.service.client(api_key=trainer) as client:
        assert client.get(f"/v1/console/policies/{case.name}").status_code == 403
        assert client.post(f"/v1/console/policies/{case.name}/rollback").status_code == 403
    with httpx.Client(base_url=case.console.service.base_url) as anonymous:
        assert anonymous.get("/v1/console/policies").status_code == 401


# --- in a real browser -----------------------------------------------------------------------


@pytest.fixture
def page(case: PolicyCase, browser: Any) -> Iterator[Any]:
    """A 1440x900 tab signed in as the operator."""
    console = case.console
    with operator_tab(
        browser, console.service.base_url, "/console/policies", console.operator
    ) as tab:
        yield tab


def test_browser_draft_with_an_error_shows_it_at_its_line(
    case: PolicyCase, page: Any, tmp_path: Path
) -> None:
    base = case.console.service.base_url
    row = page.locator(f"#policies tr[data-policy='{case.name}']")
    assert "active" in row.locator("td").nth(1).inner_text()
    row.get_by_role("link", name=case.name).focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/console/policies/{case.name}*")
    page.get_by_role("link", name="New draft").click()
    page.wait_for_url(f"**/console/policies/{case.name}/edit")
    editor = page.get_by_label("Policy document (YAML or JSON)")
    assert f"name: {case.name}" in editor.input_value()
    editor.fill(BROKEN.format(name=case.name))
    page.get_by_role("button", name="Save draft").focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("#problems")
    # The problem is printed under the line it belongs to, and named in the list.
    line = page.locator(f"#source li[data-line='{BROKEN_LINE}']")
    assert "high: lots" in line.locator("code").inner_text()
    message = line.locator(".field-error").inner_text()
    assert "reward.molecule.components[0].transform.high" in message
    assert "valid number" in message
    assert page.locator("#source .field-error").count() == 1
    assert editor.input_value() == BROKEN.format(name=case.name)  # the text is kept
    assert editor.get_attribute("aria-invalid") == "true"
    # The list's "Line 5" link puts the caret on that line of the editor.
    page.get_by_role("link", name=f"Line {BROKEN_LINE}").focus()
    page.keyboard.press("Enter")
    selected = page.evaluate(
        "(() => { const t = document.activeElement;"
        " return t.value.slice(t.selectionStart, t.selectionEnd); })()"
    )
    assert selected == "          high: lots"
    page.screenshot(path=str(tmp_path / "console-policy-draft.png"), full_page=True)
    # Nothing was stored.
    with case.api() as api:
        before = api.get(f"/v1/console/policies/{case.name}").json()["versions"]
    editor.fill(DRAFT.format(name=case.name))
    page.get_by_role("button", name="Save draft").click()
    page.wait_for_url(f"**/console/policies/{case.name}?*saved=*")
    with case.api() as api:
        after = api.get(f"/v1/console/policies/{case.name}").json()["versions"]
    assert len(after) == len(before) + 1
    saved = after[-1]
    assert saved["active"] is False
    assert saved["created_by"] == case.console.operator
    assert page.locator("#saved").inner_text().startswith(f"Draft saved as v{saved['version']}")
    changed = page.locator("#diff tr.changed, #diff tr.added").all_inner_texts()
    assert any("type: linear" in text for text in changed), changed
    assert page.url.startswith(f"{base}/console/policies/{case.name}?a=1&b={saved['version']}")
    page.screenshot(path=str(tmp_path / "console-policy-diff.png"), full_page=True)


def test_browser_replay_then_activate_and_roll_back(
    case: PolicyCase, page: Any, tmp_path: Path
) -> None:
    draft = _store_draft(case)
    base = case.console.service.base_url
    with case.api() as api:
        report = api.get(f"/v1/console/policies/{case.name}/versions/{draft}/replay").json()
    page.goto(f"{base}/console/policies/{case.name}")
    page.get_by_role("link", name=f"Replay v{draft}").click()
    page.wait_for_selector("main[data-loaded=true]")
    assert page.locator("#kpi-items").inner_text() == str(report["items"])
    assert page.locator("#kpi-reward-draft").inner_text() == f"{report['draft']['mean_reward']:.4f}"
    assert page.locator("#kpi-reward-active").inner_text() == (
        f"{report['active']['mean_reward']:.4f}"
    )
    assert page.locator("#kpi-cost-draft").inner_text() == f"{report['draft']['cost_units']:.3f}"
    rows = page.locator("#escalations tbody tr")
    shown = {
        rows.nth(i).locator("td").nth(0).inner_text(): int(
            rows.nth(i).locator("td").nth(1).inner_text()
        )
        for i in range(rows.count())
    }
    assert shown == report["draft"]["escalations"]
    changed = page.locator("#changed tbody tr")
    assert changed.count() == len(report["most_changed"])
    for i, item in enumerate(report["most_changed"]):
        cells = changed.nth(i).locator("td").all_inner_texts()
        assert cells[1] == str(item["index"])
        assert cells[4] == f"{item['delta']:+.4f}"
    # The charts are Chart.js charts holding the report's numbers.
    data = page.evaluate(
        "id => Chart.getChart(document.getElementById(id)).data.datasets.map(d => d.data)",
        "chart-escalations",
    )
    tiers = sorted(report["draft"]["escalations"])
    assert data == [
        [report["draft"]["escalations"][t] for t in tiers],
        [report["active"]["escalations"][t] for t in tiers],
    ]
    deltas = page.evaluate(
        "() => Chart.getChart(document.getElementById('chart-changed')).data.datasets[0].data"
    )
    assert deltas == pytest.approx([c["delta"] for c in report["most_changed"]])
    page.screenshot(path=str(tmp_path / "console-replay.png"), full_page=True)  # docs/img/

    # Activate from the report, then roll back from the policy page, all with the keyboard.
    page.get_by_role("button", name=f"Activate v{draft}").focus()
    with page.expect_navigation():  # the question first; its confirming button has the focus
        page.keyboard.press("Enter")
    page.wait_for_selector("#confirm button:focus", timeout=5000)  # autofocus, after load
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/console/policies/{case.name}")
    assert page.locator("#active-version").inner_text() == f"v{draft} active"
    with case.api() as api:
        assert api.get(f"/v1/policies/{case.name}").json()["active_version"] == draft
    page.get_by_role("button", name="Roll back to v1").focus()
    with page.expect_navigation():  # the question first; its confirming button has the focus
        page.keyboard.press("Enter")
    page.wait_for_selector("#confirm button:focus", timeout=5000)  # autofocus, after load
    # The page posts and comes back to the same URL: wait for that navigation, not the URL.
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator("#active-version").inner_text() == "v1 active"
    with case.api() as api:
        assert api.get(f"/v1/policies/{case.name}").json()["active_version"] == 1
    actors = {(e["action"], e["target"]): e["actor"] for e in reversed(case.audit())}
    assert actors[("policy.activate", f"{case.name}@{draft}")] == case.console.operator
    assert actors[("policy.rollback", f"{case.name}@1")] == case.console.operator
