"""The oracle page's "Surrogate against lab results" section in a real browser (Playwright +
Debian Chromium) against a live service of this module's own (API, a worker, its own PostgreSQL
database and Redis): molecules from RDKit's NCI set go up a [chem.fast, oracle] ladder, the pull
partner posts what the 'lab' measured (Crippen logP plus noise for all, TPSA for some, one
measurement failed), and the page shows:
- before a model is configured, that none is (and how many results it would be scored on);
- with a model (trained by `chem train-surrogate --csv` on other molecules), the n, MAE,
  Spearman, coverage and mean std that `oracle.calibration.calibrate` gives for the same model
  on the results the test posted, for the scored field and, chosen in the form, for another;
- without scikit-learn (hidden from a third API process), which extra to install.
Each configuration is its own API process on the same database, as an operator's restart after
setting VERIFIER_CHEM__SURROGATE_MODEL_PATH is. Screenshots of the section at 1280 and 390 px go
to VERIFIER_SCREENSHOTS (or a temporary folder; docs/img/ has copies)."""

from __future__ import annotations

import json
import os
import random
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from lab_sim import hidden_logp
from sqlalchemy import create_engine
from sqlalchemy.orm import Session
from support import Service, free_port, private_backends, start_service, until, wait_ready
from test_oracle_console_browser import PASSWORD, _submit, _text, operator_tab
from test_surrogate_retrain import _nci_smiles

from tiers.chem.surrogate_model import SurrogateModel
from verifier_service.client import OraclePartner
from verifier_service.console.oracles.service import RESULTS_SCORED
from verifier_service.oracle import repository
from verifier_service.oracle.calibration import Calibration, LabResult, calibrate, lab_results

SCHEMA = {
    "logp": {"unit": "log units", "min": -30, "max": 30},
    "tpsa": {"unit": "A^2", "min": 0, "max": 2000, "required": False},
}
DEFINITION = {
    "mode": "pull", "capacity": 1000, "batch_size": 100, "lease_s": 120, "gather_s": 0.2,
    "result_schema": SCHEMA, "score": {"field": "logp", "low": -10.0, "high": 10.0},
    "on_failure": "error",
}  # fmt: skip
N_MOLECULES = 40
IMG = Path(os.environ.get("VERIFIER_SCREENSHOTS") or tempfile.mkdtemp(prefix="oracle-shots-"))
PAGE = "/console/oracles/plate"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The service with no surrogate model configured."""
    with private_backends("orasur") as (pg_url, broker_url):
        service = start_service(
            tmp_path_factory.mktemp("orasur"),
            "ladder,tier.fast,callbacks",
            VERIFIER_DATABASE__URL=pg_url,
            VERIFIER_BROKER__URL=broker_url,
            VERIFIER_ORACLES__DEFINITIONS=json.dumps({"plate": DEFINITION}),
        )
        try:
            step = {"tier": "oracle", "config": {"oracle": "plate"}}
            document = {
                "name": "with-plate",
                "ladders": {"molecule": [{"tier": "chem.fast"}, step]},
            }
            with service.client() as operator:
                made = operator.post("/v1/policies", json={"document": document})
                assert made.status_code == 201, made.text
            made_user = service.cli(
                "users", "create", "--role", "operator", "op-oracles", stdin=PASSWORD + "\n"
            )
            assert made_user.returncode == 0, made_user.stderr
            yield service
        finally:
            service.stop_all()


@pytest.fixture(scope="module")
def measured(service: Service) -> dict[str, dict[str, float]]:
    """What the lab measured, SMILES -> values: every molecule sent, one of them failed."""
    molecules = _nci_smiles()[:N_MOLECULES]
    _submit(service, "with-plate", molecules)
    key = service.create_key("plate", "oracle")
    out: dict[str, dict[str, float]] = {}
    with OraclePartner("plate", service.base_url, api_key=key) as partner:
        while len(out) < N_MOLECULES:
            claim = until(partner.claim, what="a batch of the lab's molecules")
            results: list[dict[str, Any]] = []
            for item in claim.batch.items:
                smiles = item.payload["smiles"]
                if smiles == molecules[7]:
                    results.append({"item_id": item.item_id, "error": "crystallised in the well"})
                    out[smiles] = {}
                    continue
                noise = random.Random(smiles).gauss(0.0, 0.2)  # the lab's measurement error
                values = {"logp": round(hidden_logp(smiles) + noise, 3)}
                if len(out) % 3 == 0:
                    values["tpsa"] = round(20.0 + 3.0 * len(smiles), 2)
                results.append({"item_id": item.item_id, "values": values})
                out[smiles] = values
            assert partner.post_results(results).accepted == len(results)
    return out


@pytest.fixture(scope="module")
def model(service: Service, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A surrogate of logP trained, as operators train one, on molecules the lab never saw."""
    folder = tmp_path_factory.mktemp("surrogate")
    csv = folder / "logp.csv"
    rows = [f"{s},{hidden_logp(s):.3f}" for s in _nci_smiles()[200:360]]
    csv.write_text("smiles,logp\n" + "\n".join(rows) + "\n")
    out = folder / "logp.joblib"
    done = service.cli(
        "chem", "train-surrogate", "--csv", str(csv), "--out", str(out), "--n-estimators", "30"
    )
    assert done.returncode == 0, done.stderr
    return out


@contextmanager
def api_with(service: Service, folder: Path, **env: str) -> Iterator[Service]:
    """Another API process of the same deployment, started with `env` on top of its settings."""
    port = free_port()
    other = Service(
        base_url=f"http://127.0.0.1:{port}", env={**service.env, **env}, data_dir=folder
    )
    api = other.start("api", "api", "--port", str(port))
    try:
        wait_ready(other.base_url, process=api)
        yield other
    finally:
        other.stop_all()


def _expected(
    model: Path, measured: dict[str, dict[str, float]], field: str
) -> tuple[Calibration, int]:
    """`calibrate` on the results the test posted: the page must show these figures."""
    results = [
        LabResult(item_id=s, smiles=s, value=values[field])
        for s, values in measured.items()
        if field in values
    ]
    return calibrate(SurrogateModel.load(model), results, "expected"), len(results)


def _figure(value: float | None) -> str:
    return "\u2013" if value is None else f"{value:.3f}"


def _assert_figures(tab: Any, expected: Calibration) -> None:
    assert tab.locator("#sur-problem").count() == 0
    assert _text(tab, "#sur-n") == str(expected.n)
    assert _text(tab, "#sur-mae") == _figure(expected.mae)
    assert _text(tab, "#sur-spearman") == _figure(expected.spearman)
    assert _text(tab, "#sur-coverage") == _figure(expected.coverage)
    assert _text(tab, "#sur-std") == _figure(expected.mean_std)


def test_before_a_model_is_configured_the_page_says_none_is(
    service: Service, measured: dict[str, dict[str, float]], browser: Any
) -> None:
    with operator_tab(browser, service, PAGE) as tab:
        section = _text(tab, "#surrogate")
        assert "Surrogate against lab results" in section
        problem = _text(tab, "#sur-problem")
        assert "No surrogate model is configured" in problem
        assert "VERIFIER_CHEM__SURROGATE_MODEL_PATH" in problem
        assert "chem train-surrogate --from-oracle plate --target logp" in problem
        assert _text(tab, "#sur-usable") == str(N_MOLECULES - 1)  # the failed one is no data
        assert tab.locator("#sur-mae").count() == 0


def test_the_page_shows_the_configured_models_calibration_against_the_results(
    service: Service,
    measured: dict[str, dict[str, float]],
    model: Path,
    browser: Any,
    tmp_path: Path,
) -> None:
    logp, n_logp = _expected(model, measured, "logp")
    tpsa, n_tpsa = _expected(model, measured, "tpsa")
    assert n_logp == N_MOLECULES - 1
    assert 5 < n_tpsa < n_logp
    assert logp.spearman is not None
    assert logp.spearman > 0.6  # a logP model agrees with a logP lab: the figures mean something
    with (
        api_with(service, tmp_path, VERIFIER_CHEM__SURROGATE_MODEL_PATH=str(model)) as configured,
        operator_tab(browser, configured, PAGE) as tab,
    ):
        assert _text(tab, "#sur-model") == str(model)
        _assert_figures(tab, logp)
        assert _text(tab, "#sur-usable") == str(n_logp)
        assert tab.locator("#sur-target-note").count() == 0
        assert "computed again when the oracle records a result" in _text(tab, "#sur-computed")
        tab.set_viewport_size({"width": 1280, "height": 800})
        tab.locator("#surrogate").screenshot(path=str(IMG / "console-oracle-surrogate-1280.png"))
        tab.set_viewport_size({"width": 390, "height": 844})
        tab.locator("#surrogate").screenshot(path=str(IMG / "console-oracle-surrogate-390.png"))
        tab.set_viewport_size({"width": 1280, "height": 800})

        # Another field, chosen from the keyboard: the same model, the results that carry it.
        tab.locator("#sur-field").focus()
        tab.keyboard.press("ArrowDown")
        tab.get_by_role("button", name="Show").focus()
        tab.keyboard.press("Enter")
        tab.wait_for_url("**field=tpsa*")
        _assert_figures(tab, tpsa)
        assert _text(tab, "#sur-usable") == str(n_tpsa)
        assert "trained on logp, not tpsa" in _text(tab, "#sur-target-note")

        answer = tab.goto(f"{configured.base_url}{PAGE}?field=ic50_nM")
        assert answer is not None
        assert answer.status == 200
        assert "Oracle plate has no result field 'ic50_nM'; its fields: logp, tpsa." in _text(
            tab, "#sur-problem"
        )


def test_without_scikit_learn_the_page_names_the_extra(
    service: Service,
    measured: dict[str, dict[str, float]],
    model: Path,
    browser: Any,
    tmp_path: Path,
) -> None:
    hidden = tmp_path / "no-sklearn" / "sklearn"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        "raise ImportError(\"No module named 'sklearn' (hidden by the test)\")\n"
    )
    path = os.pathsep.join(p for p in (str(hidden.parent), service.env.get("PYTHONPATH")) if p)
    with (
        api_with(
            service, tmp_path, VERIFIER_CHEM__SURROGATE_MODEL_PATH=str(model), PYTHONPATH=path
        ) as bare,
        operator_tab(browser, bare, PAGE) as tab,
    ):
        problem = _text(tab, "#sur-problem")
        assert "needs scikit-learn and joblib, the 'ml' extra" in problem
        assert "pip install 'verifier-service[ml]'" in problem
        assert _text(tab, "#sur-usable") == str(N_MOLECULES - 1)


def test_the_cap_takes_the_latest_results(
    service: Service, measured: dict[str, dict[str, float]]
) -> None:
    """The page scores the latest RESULTS_SCORED results; the same query capped lower here takes
    the latest answers and keeps them oldest first (so a molecule's latest result wins)."""
    assert RESULTS_SCORED == 500
    engine = create_engine(service.env["VERIFIER_DATABASE__URL"])
    try:
        with Session(engine) as session:
            every = repository.answered_molecules(session, "plate")
            latest = repository.answered_molecules(session, "plate", latest=5)
            capped = lab_results(session, "plate", "logp", latest=5)
    finally:
        engine.dispose()
    assert len(every) == N_MOLECULES
    assert [i.id for i in latest] == [i.id for i in every[-5:]]
    assert len(capped.results) + capped.skipped == 5
    assert {r.smiles for r in capped.results} <= {i.payload["smiles"] for i in every[-5:]}
