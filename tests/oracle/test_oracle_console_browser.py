"""The console's oracle pages in a real browser (Playwright + Debian Chromium) against a live
service of this module's own (API, a worker, its own PostgreSQL database and Redis): the
figures on an oracle's page are the ones the test made happen (items sent, results posted and
their values, a batch left overdue), Pause (a CSRF form) stops claims until Resume, and Resend
gives a pull batch back to be claimed and pushes a push batch again. Screenshots at 1280 and
390 px go to VERIFIER_SCREENSHOTS (or a temporary folder; docs/img/ has copies)."""

from __future__ import annotations

import base64
import json
import os
import secrets
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from lab_sim import Lab, hidden_logp
from support import Service, free_port, fresh_molecules, private_backends, start_service, until

from verifier_service.client import Claim, OraclePartner
from verifier_service.console.oracles.service import duration

PASSWORD = "correct horse battery staple"
SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
SCHEMA = {"logp": {"unit": "log units", "min": -30, "max": 30}}
SCORE = {"field": "logp", "low": -10.0, "high": 10.0}
CAPACITY = 10
TURNAROUND_S = 3.0
IMG = Path(os.environ.get("VERIFIER_SCREENSHOTS") or tempfile.mkdtemp(prefix="oracle-shots-"))


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = Lab(SECRET, port=free_port(), delay_s=3600)  # takes batches, answers much later
    yield lab
    lab.close()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, lab: Lab) -> Iterator[Service]:
    common = {"result_schema": SCHEMA, "score": SCORE, "gather_s": 0.2}
    definitions = {
        "plate": {**common, "mode": "pull", "capacity": CAPACITY, "period_s": 864000,
                  "turnaround_s": TURNAROUND_S, "lease_s": 120, "price_per_item": 40},
        "lab": {**common, "mode": "push", "url": lab.url, "secret": SECRET, "capacity": 100,
                "turnaround_s": 3600},
    }  # fmt: skip
    with private_backends("oracon") as (pg_url, broker_url):
        service = start_service(
            tmp_path_factory.mktemp("oracon"),
            "ladder,tier.fast,callbacks",
            VERIFIER_DATABASE__URL=pg_url,
            VERIFIER_BROKER__URL=broker_url,
            VERIFIER_ORACLES__DEFINITIONS=json.dumps(definitions),
            VERIFIER_API__OUTBOX_SWEEP_S="0.5",
            VERIFIER_API__OUTBOX_GRACE_S="0.5",
        )
        try:
            with service.client() as operator:
                for oracle in ("plate", "lab"):
                    step = {"tier": "oracle", "config": {"oracle": oracle}}
                    document = {"name": f"with-{oracle}",
                                "ladders": {"molecule": [{"tier": "chem.fast"}, step]}}  # fmt: skip
                    made = operator.post("/v1/policies", json={"document": document})
                    assert made.status_code == 201, made.text
            made_user = service.cli(
                "users", "create", "--role", "operator", "op-oracles", stdin=PASSWORD + "\n"
            )
            assert made_user.returncode == 0, made_user.stderr
            lab.api_base = service.base_url
            yield service
        finally:
            service.stop_all()


@pytest.fixture(scope="module")
def partner(service: Service) -> Iterator[OraclePartner]:
    key = service.create_key("plate", "oracle")
    with OraclePartner("plate", service.base_url, api_key=key) as partner:
        yield partner


@contextmanager
def operator_tab(browser: Any, service: Service, path: str) -> Iterator[Any]:
    """A tab signed in as the operator on `path`; on leaving, no request went off-site and no
    script error was raised."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    offsite: list[str] = []
    tab.on("request", lambda r: offsite.append(r.url) if "127.0.0.1" not in r.url else None)
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.goto(f"{service.base_url}{path}")
    tab.wait_for_url(f"**/signin?next={path}")
    tab.get_by_label("Username").fill("op-oracles")
    tab.get_by_label("Password").fill(PASSWORD)
    tab.get_by_role("button", name="Sign in").click()
    tab.wait_for_url(f"**{path}")
    try:
        yield tab
    finally:
        context.close()
    assert offsite == []
    assert errors == []


def _submit(service: Service, policy: str, smiles: list[str]) -> str:
    items = [{"kind": "molecule", "payload": {"smiles": s}} for s in smiles]
    with service.client() as client:
        posted = client.post(
            "/v1/rewards", json={"policy": policy, "items": items, "deadline_s": 300}
        )
    assert posted.status_code == 202, posted.text
    job_id: str = posted.json()["id"]
    return job_id


def _figures(service: Service, name: str) -> dict[str, Any]:
    with service.client() as client:
        found: dict[str, Any] = {o["name"]: o for o in client.get("/v1/oracles").json()}[name]
    return found


def _text(tab: Any, selector: str) -> str:
    return " ".join(str(tab.locator(selector).inner_text()).split())


def test_the_oracle_page_shows_what_was_sent_and_answered(
    service: Service, partner: OraclePartner, browser: Any
) -> None:
    molecules = fresh_molecules(4)
    _submit(service, "with-plate", molecules)
    claim: Claim = until(partner.claim, what="the batch")
    assert len(claim.batch.items) == 4
    answered, waiting = claim.batch.items[:3], claim.batch.items[3]
    values = {i.item_id: hidden_logp(i.payload["smiles"]) for i in answered}
    posted = partner.post_results(
        [{"item_id": item_id, "values": {"logp": v}} for item_id, v in values.items()]
    )
    assert posted.accepted == 3
    time.sleep(max(0.0, (claim.batch.due_at.timestamp() - time.time()) + 0.5))  # now overdue
    api = _figures(service, "plate")
    assert (api["used_this_period"], api["in_flight"], api["overdue_batches"]) == (4, 1, 1)
    assert 0 < api["turnaround_p50_s"] <= api["turnaround_p95_s"] < 30

    with operator_tab(browser, service, "/console/oracles/plate") as tab:
        assert _text(tab, "#kpi-used") == f"4 / {CAPACITY}"
        assert _text(tab, "#kpi-in-flight") == "1"
        assert _text(tab, "#kpi-overdue") == "1"
        assert _text(tab, "#kpi-p50") == duration(api["turnaround_p50_s"])
        assert _text(tab, "#kpi-p95") == duration(api["turnaround_p95_s"])
        row = tab.locator(f"#batch-table tr[data-batch='{claim.batch.batch_id}']")
        assert _text(tab, f"#batch-table tr[data-batch='{claim.batch.batch_id}'] .results") == (
            "3 / 4"
        )
        assert "overdue" in row.inner_text()
        assert "leased" in row.inner_text()
        results = tab.locator("#result-table tbody tr")
        assert results.count() == 3
        for item_id, value in values.items():
            cell = tab.locator(f"#result-table tr[data-item='{item_id}'] [data-field='logp']")
            assert cell.inner_text() == f"logp = {value} log units"
        assert tab.locator(f"#result-table tr[data-item='{waiting.item_id}']").count() == 0
        assert _text(tab, "#item-states tr[data-state='answered'] .num") == "3"
        assert _text(tab, "#item-states tr[data-state='batched'] .num") == "1"
        tab.set_viewport_size({"width": 1280, "height": 800})
        tab.screenshot(path=str(IMG / "console-oracle-1280.png"), full_page=True)
        tab.set_viewport_size({"width": 390, "height": 844})
        tab.screenshot(path=str(IMG / "console-oracle-390.png"), full_page=True)
        tab.set_viewport_size({"width": 1280, "height": 800})
        tab.get_by_role("link", name="Oracles", exact=True).first.click()
        tab.wait_for_url("**/console/oracles")
        plate = "#oracles tr[data-oracle='plate']"
        assert _text(tab, f"{plate} .used") == f"4 / {CAPACITY}"
        assert _text(tab, f"{plate} .in-flight") == "1"
        assert _text(tab, f"{plate} .overdue") == "1"
        assert _text(tab, f"{plate} .p50") == duration(api["turnaround_p50_s"])
        assert tab.locator("#oracles tr[data-oracle='lab']").count() == 1
        tab.screenshot(path=str(IMG / "console-oracles-1280.png"), full_page=True)
        tab.set_viewport_size({"width": 390, "height": 844})
        tab.screenshot(path=str(IMG / "console-oracles-390.png"), full_page=True)
    # Leave nothing in flight for the next tests' counts.
    assert partner.post_results([{"item_id": waiting.item_id, "values": {"logp": 1.0}}]).accepted


def test_pause_by_the_form_stops_claims_until_resume(
    service: Service, partner: OraclePartner, browser: Any
) -> None:
    with operator_tab(browser, service, "/console/oracles/plate") as tab:
        forged = tab.request.post(
            f"{service.base_url}/console/oracles/plate/pause", form={"csrf_token": "forged"}
        )
        assert forged.status == 401  # a form without this page's token does nothing
        assert _figures(service, "plate")["paused"] is False
        tab.get_by_role("button", name="Pause oracle plate").click()
        tab.wait_for_selector("#paused-note")
        assert _text(tab, "#state") == "paused"
        assert "Paused by op-oracles" in _text(tab, "#paused-note")
        assert _figures(service, "plate")["paused"] is True
        molecule = fresh_molecules(1)
        _submit(service, "with-plate", molecule)
        for _ in range(15):  # 3 s: the item is gathered and would be batched if not paused
            assert partner.claim() is None
            time.sleep(0.2)
        tab.reload()
        assert _text(tab, "#kpi-queued") == "1"
        tab.get_by_role("button", name="Resume oracle plate").focus()  # from the keyboard
        tab.keyboard.press("Enter")
        tab.wait_for_selector("#state .running")
        assert tab.locator("#paused-note").count() == 0
        claim: Claim = until(partner.claim, what="the batch after Resume")
        assert [i.payload["smiles"] for i in claim.batch.items] == molecule
        partner.post_results([{"item_id": claim.batch.items[0].item_id, "values": {"logp": 2}}])


def test_resend_gives_a_pull_batch_back_and_pushes_a_push_batch_again(
    service: Service, partner: OraclePartner, browser: Any, lab: Lab
) -> None:
    _submit(service, "with-plate", fresh_molecules(2))
    claim: Claim = until(partner.claim, what="the batch")
    first, second = claim.batch.items
    partner.post_results([{"item_id": first.item_id, "values": {"logp": 0.5}}])
    batch_id = claim.batch.batch_id
    with operator_tab(browser, service, "/console/oracles/plate") as tab:
        tab.get_by_role("button", name=f"Resend batch {batch_id}").click()
        tab.wait_for_selector("#resent-note")
        assert "now open (given back to be claimed)" in _text(tab, "#resent-note")
        again: Claim = until(partner.claim, what="the batch given back")
        assert again.batch.batch_id == batch_id
        assert [i.item_id for i in again.batch.items] == [second.item_id]  # only what is missing
        partner.post_results([{"item_id": second.item_id, "values": {"logp": 0.25}}])
        tab.reload()
        row = f"#batch-table tr[data-batch='{batch_id}']"
        assert tab.locator(row).get_attribute("data-state") == "done"
        assert _text(tab, f"{row} .results") == "2 / 2"
        assert tab.get_by_role("button", name=f"Resend batch {batch_id}").count() == 0

    marker = fresh_molecules(1)
    _submit(service, "with-lab", marker)
    pushed = until(
        lambda: next((b for b in lab.batches if b["items"][0]["payload"]["smiles"] == marker[0]),
                     None),
        what="the pushed batch",
    )  # fmt: skip
    path = f"/v1/oracles/lab/batches/{pushed['batch_id']}"
    with service.client() as client:
        until(lambda: client.get(path).json()["state"] == "sent", what="the batch sent")
    with operator_tab(browser, service, "/console/oracles/lab") as tab:
        tab.get_by_role("button", name=f"Resend batch {pushed['batch_id']}").click()
        tab.wait_for_selector("#resent-note")
        with service.client() as client:

            def two_attempts() -> list[dict[str, Any]] | None:
                found: list[dict[str, Any]] = client.get(path).json()["attempts"]
                return found if len(found) == 2 else None

            attempts = until(two_attempts, what="the second push")
        assert [a["status_code"] for a in attempts] == [202, 200]  # the lab says it had it
        tab.reload()
        row = f"#batch-table tr[data-batch='{pushed['batch_id']}']"
        assert tab.locator(row).get_attribute("data-state") == "sent"
        assert _text(tab, f"{row} td:nth-child(6)") == "2"


def test_an_unknown_oracle_is_a_404_page(service: Service, browser: Any) -> None:
    with operator_tab(browser, service, "/console/oracles") as tab:
        answer = tab.goto(f"{service.base_url}/console/oracles/nosuch-{uuid.uuid4().hex[:4]}")
        assert answer is not None
        assert answer.status == 404
