"""Bad input gets a clear 4xx or a scored verdict with feedback, never a 500."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from support import REPO, Service, free_port, wait_ready

from tiers.chem.molecule import MAX_SMILES_LENGTH

MOLECULE = {"kind": "molecule", "payload": {"smiles": "CCO"}}


def _post(service: Service, body: object = None, content: bytes | None = None) -> tuple[int, dict]:
    with service.client() as client:
        if content is not None:
            response = client.post(
                "/v1/rewards", content=content, headers={"content-type": "application/json"}
            )
        else:
            response = client.post("/v1/rewards", json=body)
    return response.status_code, response.json()


def test_malformed_json(live_service: Service) -> None:
    status, body = _post(live_service, content=b'{"items": [')
    assert status == 422
    assert body["error"] == "invalid_request"
    assert "JSON" in body["message"]


def test_unknown_kind_names_the_field(live_service: Service) -> None:
    status, body = _post(live_service, {"items": [{"kind": "protein", "payload": {}}]})
    assert status == 422
    assert body["errors"][0]["loc"] == "body.items[0]"
    assert "protein" in body["message"]


def test_empty_items(live_service: Service) -> None:
    status, body = _post(live_service, {"items": []})
    assert status == 422
    assert "items" in body["message"]


def test_oversized_body_is_413(live_service: Service) -> None:
    smiles = "C" * 2000
    items = [{"kind": "molecule", "payload": {"smiles": smiles}}] * 600  # ~1.3 MB > 1 MB limit
    status, body = _post(live_service, {"items": items})
    assert status == 413
    assert "1000000 bytes" in body["message"]


def test_too_many_items_is_413(live_service: Service) -> None:
    items = [{"kind": "molecule", "payload": {"smiles": "C"}}] * 2001
    status, body = _post(live_service, {"items": items})
    assert status == 413
    assert "2001 items" in body["message"]
    assert "limit is 2000" in body["message"]


def test_invalid_json_schema_is_rejected_with_its_path(live_service: Service) -> None:
    item = {"kind": "json", "payload": {"a": 1}, "reference": {"schema": {"type": "objekt"}}}
    status, body = _post(live_service, {"items": [item]})
    assert status == 422
    assert body["errors"][0]["loc"].startswith("body.items[0]")
    assert "invalid JSON Schema" in body["message"]


def test_unknown_policy_is_404_with_the_available_ones(live_service: Service) -> None:
    item = {"kind": "molecule", "payload": {"smiles": "C"}}
    status, body = _post(live_service, {"policy": "nope", "items": [item]})
    assert status == 404
    assert "default" in body["hint"]


def test_kind_without_a_ladder_is_rejected(live_service: Service) -> None:
    status, body = _post(live_service, {"items": [{"kind": "text", "payload": {"text": "hi"}}]})
    assert status == 422
    assert "no ladder for kind 'text'" in body["message"]


@pytest.mark.parametrize(
    ("smiles", "reason_part"),
    [
        ("", "empty"),
        ("this is not a molecule", "parse"),
        ("c1ccccc1C(", "parse"),
        ("CN(C)(C)(C)C", "valence"),  # pentavalent N: sanitization message from RDKit
    ],
)
def test_garbage_smiles_is_a_scored_zero_with_feedback(
    live_service: Service, smiles: str, reason_part: str
) -> None:
    body = {"items": [{"kind": "molecule", "payload": {"smiles": smiles}}], "wait_s": 20}
    status, job = _post(live_service, body)
    assert status == 200
    item = job["items"][0]
    assert item["reward"]["status"] == "scored"
    assert item["reward"]["value"] == 0.0
    verdict = item["verdicts"][0]
    assert verdict["status"] == "failed"
    assert verdict["feedback"]
    assert reason_part in (verdict["feedback"] + (verdict["reason"] or "")).lower()


def test_schema_violation_feedback_names_the_path(live_service: Service) -> None:
    item = {
        "kind": "json",
        "payload": {"tool": "search", "args": {"q": 3}},
        "reference": {
            "schema": {
                "type": "object",
                "properties": {"args": {"properties": {"q": {"type": "string"}}}},
            }
        },
    }
    status, job = _post(live_service, {"items": [item], "wait_s": 20})
    assert status == 200
    verdict = job["items"][0]["verdicts"][0]
    assert verdict["status"] == "failed"
    assert "$.args.q" in verdict["feedback"]
    assert job["items"][0]["reward"]["value"] == 0.0


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"deadline_s": 1e300}, "body.deadline_s"),
        ({"policy": "default\u0000"}, "body.policy"),
        ({"policy": "Not A Slug"}, "body.policy"),
        ({"items": [{**MOLECULE, "metadata": {"group": "g" * 300}}]}, "body.items[0].molecule"),
        ({"items": [{**MOLECULE, "metadata": {"group": {"a": 1}}}]}, "body.items[0].molecule"),
    ],
)
def test_values_the_service_cannot_store_are_422(
    live_service: Service, change: dict[str, object], where: str
) -> None:
    # Found by fuzzing (tests/e2e/test_api_fuzz.py): each of these used to be a 500.
    status, body = _post(live_service, {"items": [MOLECULE], **change})
    assert status == 422, body
    assert body["errors"][0]["loc"].startswith(where)


def test_policy_paths_reject_what_no_policy_can_be_named(live_service: Service) -> None:
    with live_service.client() as client:
        bad_name = client.get("/v1/policies/a%00b")
        bad_version = client.get(f"/v1/policies/default/versions/{2**40}")
    assert bad_name.status_code == 422
    assert bad_version.status_code == 422


@pytest.mark.parametrize(
    ("url", "where"),
    [
        # Found by the fuzz test: a 500 (PostgreSQL cannot compare a text holding NUL).
        ("/v1/review/adjudications?queue=a%00b&limit=10", "query"),
        ("/v1/review/adjudications?queue=%F2%8E%91%8B%C3%BA%1F%00", "query"),
        ("/v1/jobs/abc%00def", "path"),
        ("/v1/jobs/abc/cost?x=%00", "query"),
    ],
)
def test_a_nul_anywhere_in_the_url_is_422(live_service: Service, url: str, where: str) -> None:
    with live_service.client() as client:
        response = client.get(url)
    assert response.status_code == 422, response.text
    assert response.json()["message"] == f"the URL's {where} holds a NUL character (%00)"


def test_review_filters_reject_what_no_queue_can_be_named(live_service: Service) -> None:
    with live_service.client() as client:
        response = client.get("/v1/review/adjudications", params={"queue": "Not A Queue"})
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == "query.queue"


@pytest.mark.parametrize(
    ("payload", "where", "says"),
    [
        ({"code": "x = 1", "tests": ""}, "body.items[0].code.payload.tests", "at least 1"),
        ({"code": "x = 1"}, "body.items[0].code.payload.tests", "required"),
        (
            {"code": "x = 1", "tests": "assert x", "memory_mb": 32},
            "body.items[0].code.payload.memory_mb",
            "greater than or equal to 64",
        ),
        (
            {"code": "x" * 600_000, "tests": "assert x"},
            "body.items[0].code.payload",
            "the limit is 524288 (sandbox.max_source_bytes)",
        ),
    ],
)
def test_code_the_sandbox_would_refuse_is_422_with_its_path(
    live_service: Service, payload: dict[str, object], where: str, says: str
) -> None:
    # These used to be accepted and then end as an infra_error reward (issue 10).
    status, body = _post(live_service, {"items": [{"kind": "code", "payload": payload}]})
    assert status == 422, body
    assert body["errors"][0]["loc"] == where
    assert says in body["message"]


@pytest.fixture(scope="module")
def default_limits_api(live_service: Service) -> Iterator[Service]:
    """A second API on live_service's database and broker, with the default 8 MiB body limit."""
    port = free_port()
    env = {k: v for k, v in live_service.env.items() if k != "VERIFIER_API__MAX_BODY_BYTES"}
    service = Service(
        base_url=f"http://127.0.0.1:{port}",
        env=env,
        data_dir=live_service.data_dir,
        api_key=live_service.api_key,
    )
    api = service.start("api-default-limits", "api", "--port", str(port))
    wait_ready(service.base_url, process=api)
    yield service
    service.stop_all()


def _alive(service: Service, name: str) -> None:
    with service.client(timeout=5) as client:
        assert client.get("/healthz").status_code == 200
    assert service.processes[name].poll() is None, service.log_tail(name)


@pytest.mark.parametrize("length", [20_000, 8_000_000])
def test_overlong_smiles_is_422_before_any_work(default_limits_api: Service, length: int) -> None:
    # 20,000 characters used to segfault the API (RDKit's canonicaliser overflowed the stack of
    # the inline lane's thread); 8 MB held gigabytes for minutes. Both are refused unread.
    body = {"items": [{"kind": "molecule", "payload": {"smiles": "C" * length}}], "wait_s": 10}
    started = time.monotonic()
    status, answer = _post(default_limits_api, body)
    elapsed = time.monotonic() - started
    assert status == 422, answer
    assert answer["errors"][0]["loc"] == "body.items[0].molecule.payload.smiles"
    assert str(MAX_SMILES_LENGTH) in answer["message"]
    assert elapsed < 3, elapsed
    _alive(default_limits_api, "api-default-limits")


def test_deeply_nested_body_is_422_naming_the_limit(live_service: Service) -> None:
    # A 3 KB body nested 500 deep used to answer 500 after 40-130 s, block /healthz as long and
    # log ~24 MB of traceback with locals.
    depth = 500
    nested = b'{"a":' * depth + b"1" + b"}" * depth
    body = b'{"items":[{"kind":"json","payload":' + nested + b'}],"wait_s":5}'
    log_before = live_service.logs["api"].stat().st_size
    started = time.monotonic()
    status, answer = _post(live_service, content=body)
    assert time.monotonic() - started < 3
    assert status == 422, answer
    assert "the limit is 64" in answer["message"]
    _alive(live_service, "api")
    assert live_service.logs["api"].stat().st_size - log_before < 10_000


def test_longest_smiles_survives_small_default_thread_stacks(live_service: Service) -> None:
    # RDKit's canonicaliser needs ~1.9 MiB of stack for MAX_SMILES_LENGTH chain atoms; under
    # `ulimit -s 1024` threads get 1 MiB unless the API sets its own size (it sets 16 MiB).
    port = free_port()
    log = live_service.data_dir / "api-small-stack.log"
    api = subprocess.Popen(
        [sys.executable, "-m", "verifier_service", "api", "--port", str(port)],
        env=live_service.env, stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=REPO,
        start_new_session=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_STACK, (1 << 20, 1 << 20)),
    )  # fmt: skip
    try:
        wait_ready(f"http://127.0.0.1:{port}", process=api)
        smiles = "C" * MAX_SMILES_LENGTH
        body = {"items": [{"kind": "molecule", "payload": {"smiles": smiles}}], "wait_s": 10}
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", timeout=60, headers=live_service.auth_headers
        ) as client:
            response = client.post("/v1/rewards", json=body)
            assert response.status_code in (200, 202), response.text
            assert client.get("/healthz").status_code == 200
        assert api.poll() is None, log.read_text()[-3000:]
    finally:
        os.killpg(api.pid, signal.SIGTERM)
        api.wait(timeout=30)


# Issue 36, item 4: what used to end infra_error, be stored as null, or get a 400 that named
# neither the field nor the cause.


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"$ref": "#"}, "a `$ref` loop"),
        ({"properties": {"q": {"pattern": "^(?=a)"}}}, "RE2 syntax"),
    ],
)
def test_a_reference_schema_that_cannot_work_is_422_at_the_field(
    live_service: Service, schema: dict[str, object], says: str
) -> None:
    item = {"kind": "json", "payload": {"q": "a"}, "reference": {"schema": schema}}
    status, body = _post(live_service, {"items": [item], "wait_s": 10})
    assert status == 422, body
    assert body["errors"][0]["loc"] == "body.items[0].json.reference"
    assert says in body["message"]


@pytest.mark.parametrize(
    ("content", "loc", "says"),
    [
        (
            b'{"items":[{"kind":"json","payload":{"q":1},'
            b'"reference":{"schema":{"maximum":1e309}}}]}',
            "body.items[0].reference.schema.maximum",
            "1e309 is too large for a double",
        ),
        (
            b'{"items":[{"kind":"json","payload":{"q":[1,-1E+400]}}]}',
            "body.items[0].payload.q[1]",
            "too large for a double",
        ),
        (b'{"items":[{"kind":"json","payload":{"q":NaN}}]}', "body.items[0].payload.q", "NaN"),
        (
            b'{"items":[{"kind":"json","payload":{"n":' + b"7" * 5000 + b"}}]}",
            "body.items[0].payload.n",
            "an integer of 5000 digits; the limit is 4300",
        ),
        (
            b'{"items":[{"kind":"molecule","payload":{"smiles":"C\xffC"}}]}',
            "body",
            "not valid UTF-8: byte 0xff at offset 51",
        ),
    ],
)
def test_numbers_and_bytes_the_service_cannot_keep_are_422_naming_where(
    live_service: Service, content: bytes, loc: str, says: str
) -> None:
    status, body = _post(live_service, content=content)
    assert status == 422, body
    assert body["errors"][0]["loc"] == loc
    assert says in body["message"]
    assert body["message"].startswith(loc)


def test_a_number_inside_a_string_is_left_alone(live_service: Service) -> None:
    # The scan for such numbers skips strings: a SMILES-like text with 1e309 in it is data.
    item = {"kind": "json", "payload": {"q": "1e309 NaN " + "9" * 400}, "reference": {"schema": {}}}
    status, job = _post(live_service, {"items": [item], "wait_s": 20})
    assert status == 200, job
    assert job["items"][0]["reward"]["value"] == 1.0


def test_an_empty_idempotency_key_is_refused(live_service: Service) -> None:
    # It used to be taken as a key: every later request with another body got a 409.
    with live_service.client() as client:
        response = client.post(
            "/v1/rewards", json={"items": [MOLECULE]}, headers={"Idempotency-Key": ""}
        )
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"] == "header.idempotency-key"


def _rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status").read().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_too_many_items_are_refused_before_the_body_is_parsed(default_limits_api: Service) -> None:
    # 100,000 items (3.5 MB, inside the 8 MiB limit) were parsed into models before the item
    # limit refused them: the API grew from 353 to 540 MB and kept it.
    api = default_limits_api.processes["api-default-limits"].pid
    items = b",".join([b'{"kind":"molecule","payload":{"smiles":"C"}}'] * 100_000)
    content = b'{"items":[' + items + b'],"wait_s":1}'
    before = _rss_mb(api)
    started = time.monotonic()
    status, body = _post(default_limits_api, content=content)
    elapsed = time.monotonic() - started
    grown = _rss_mb(api) - before
    assert status == 413, body
    assert body["message"] == "100000 items in one request; the limit is 2000"
    assert grown < 60, f"the API grew by {grown:.0f} MB"
    assert elapsed < 10, elapsed
    _alive(default_limits_api, "api-default-limits")


def test_a_policy_posted_as_the_body_says_how_to_send_it(live_service: Service) -> None:
    # The newcomer's first try: the policy document itself as the body. Before, one "Extra
    # inputs are not permitted" per key and nothing about `document` or `text`.
    document = {"name": "bare", "ladders": {"molecule": [{"tier": "chem.fast"}]}}
    with live_service.client() as client:
        bare = client.post("/v1/policies/validate", json=document)
        wrapped = client.post("/v1/policies/validate", json={"document": document})
    assert bare.status_code == 422, bare.text
    body = bare.json()
    assert len(body["errors"]) == 1, body
    assert '{"document": {...}}' in body["message"]
    assert '{"text": "..."}' in body["message"]
    assert wrapped.status_code == 200, wrapped.text
