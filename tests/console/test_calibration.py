"""Calibration of an audited gate through real processes: molecules climb from chem.fast to
chem.surrogate under a policy that audits every item, and the calibration JSON and page say what
the jobs' own verdicts say: the rank correlation of QED against the surrogate's score and what
the gate did with the molecules the surrogate rates good or bad."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from judge_console_support import calibration, make_operator, signed_in
from rdkit import RDConfig
from scipy.stats import spearmanr
from support import Service, private_backends, start_service

GATE = "verdicts['chem.fast'].status == 'passed' && verdicts['chem.fast'].components.qed > 0.5"
LADDER = {
    "molecule": [
        {"tier": "chem.fast"},
        {"tier": "chem.surrogate", "gate": GATE, "audit_fraction": 1.0, "config": {"xtb": False}},
    ]
}


def _molecules(n: int) -> list[str]:
    """N drug-like and not so drug-like molecules from RDKit's NCI sample."""
    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    lines = path.read_text().splitlines()[100 : 100 + n]
    return [line.split()[0] for line in lines]


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A service with a sim worker that ran one job under an audited policy."""
    with private_backends("ccal") as (pg_url, redis_url):
        service = start_service(
            tmp_path_factory.mktemp("ccal"), "ladder,tier.fast,tier.sim,callbacks",
            VERIFIER_DATABASE__URL=pg_url, VERIFIER_BROKER__URL=redis_url,
        )  # fmt: skip
        try:
            operator = make_operator(service, uuid.uuid4().hex[:6])
            policy = f"audited-{uuid.uuid4().hex[:6]}"
            with service.client(timeout=180) as client:
                made_policy = client.post(
                    "/v1/policies", json={"document": {"name": policy, "ladders": LADDER}}
                )
                assert made_policy.status_code == 201, made_policy.text
                items = [{"kind": "molecule", "payload": {"smiles": s}} for s in _molecules(24)]
                answer = client.post(
                    "/v1/rewards", json={"policy": policy, "items": items, "wait_s": 150}
                )
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "completed"
            yield {"service": service, "operator": operator, "policy": policy,
                   "job": answer.json()}  # fmt: skip
        finally:
            service.stop_all()


def _expected(job: dict[str, Any]) -> list[tuple[float, float, bool]]:
    """(QED, surrogate score, gate let it up) of every item both tiers scored."""
    out = []
    for item in job["items"]:
        verdicts = {v["tier"]: v for v in item["verdicts"]}
        fast, sim = verdicts.get("chem.fast"), verdicts.get("chem.surrogate")
        if fast is None or sim is None or sim["score"] is None:
            continue
        qed = fast["components"].get("qed")
        if qed is None:
            continue
        passed = fast["status"] == "passed" and qed > 0.5
        out.append((qed, sim["score"], passed))
    return out


def test_calibration_matches_the_jobs_verdicts(audited: dict[str, Any]) -> None:
    body = calibration(audited["service"], "1h")
    (gate,) = [g for g in body["gates"] if g["policy"] == audited["policy"]]
    tiers = (gate["cheap_tier"], gate["upper_tier"], gate["step"])
    assert tiers == ("chem.fast", "chem.surrogate", 1)
    assert (gate["cheap_value"], gate["threshold"]) == ("components.qed", 0.5)
    expected = _expected(audited["job"])
    assert len(expected) >= 10
    assert gate["pairs"] == len(expected)
    # Both gate decisions happened: the test sees the gate let some up and hold some back.
    assert {p for _, _, p in expected} == {True, False}
    rho = spearmanr([q for q, _, _ in expected], [s for _, s, _ in expected]).statistic
    assert gate["spearman"] == pytest.approx(rho, abs=1e-9)
    confusion = {
        "passed_good": sum(1 for _, s, p in expected if p and s >= 0.5),
        "passed_bad": sum(1 for _, s, p in expected if p and s < 0.5),
        "held_good": sum(1 for _, s, p in expected if not p and s >= 0.5),
        "held_bad": sum(1 for _, s, p in expected if not p and s < 0.5),
    }
    assert gate["confusion"] == confusion
    assert sorted((p["cheap"], p["upper"], p["passed"]) for p in gate["points"]) == sorted(expected)
    # Over time: five-minute stretches of the hour, every pair in one of them.
    assert len(gate["buckets"]) == 12
    assert sum(b["pairs"] for b in gate["buckets"]) == len(expected)


def test_a_stricter_threshold_moves_items_to_bad(audited: dict[str, Any]) -> None:
    gate = next(
        g for g in calibration(audited["service"], "1h", threshold=0.99)["gates"]
        if g["policy"] == audited["policy"]
    )  # fmt: skip
    expected = _expected(audited["job"])
    assert gate["threshold"] == 0.99
    bad = sum(1 for _, s, _ in expected if s < 0.99)
    assert gate["confusion"]["passed_bad"] + gate["confusion"]["held_bad"] == bad


def test_calibration_is_for_operators_only(audited: dict[str, Any]) -> None:
    service: Service = audited["service"]
    key = service.create_key(f"trainer-{uuid.uuid4().hex[:6]}", "trainer")
    with service.client(api_key=key) as client:
        assert client.get("/v1/console/calibration").status_code == 403
        assert client.get("/console/calibration").status_code == 403


def test_the_page_shows_the_calibration(
    audited: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    service: Service = audited["service"]
    gate = next(g for g in calibration(service, "1h")["gates"] if g["policy"] == audited["policy"])
    with signed_in(browser, service, audited["operator"]) as page:
        section = page.locator(f"section.gate[data-policy='{audited['policy']}']")
        assert section.locator(".gate-pairs").inner_text() == str(gate["pairs"])
        assert section.locator(".gate-rho").inner_text() == f"{gate['spearman']:.3f}"
        assert section.locator(".gate-wrong-pass").inner_text() == str(
            gate["confusion"]["passed_bad"]
        )
        assert section.locator(".gate-wrong-hold").inner_text() == str(
            gate["confusion"]["held_good"]
        )
        assert section.locator("svg circle").count() >= gate["pairs"]
        cells = section.locator("table.confusion tbody td").all_inner_texts()
        m = gate["confusion"]
        assert [int(c) for c in cells] == [
            m["passed_good"], m["passed_bad"], m["held_good"], m["held_bad"]
        ]  # fmt: skip
        # The keyboard reaches the page's nav: Tab from the top lands on the skip link, then
        # the console's links; the calibration link says it is the current page.
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
        current = page.locator("nav[aria-label=Console] a[aria-current=page]")
        assert current.inner_text() == "Calibration"
        windows = page.locator("nav[aria-label='Time window'] a")
        windows.nth(0).focus()
        page.keyboard.press("Enter")
        page.wait_for_url("**/console/calibration?window=1h")
        assert section.locator(".gate-pairs").inner_text() == str(gate["pairs"])
        # Copied to docs/img/console-calibration.png by hand when the page changes.
        page.screenshot(path=str(tmp_path / "console-calibration.png"), full_page=True)
