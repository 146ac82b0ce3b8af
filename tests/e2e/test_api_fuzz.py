"""Property-based fuzzing of the whole HTTP API from its own OpenAPI document (schemathesis).

Whatever a client sends that the schema allows, or nearly allows, the answer is never a 5xx:
bad input gets a 4xx that says what was wrong. Runs against real processes (uvicorn, a Celery
worker, PostgreSQL, Redis); waits are capped at a second so that items no worker here can
finish (code: no sandbox worker) come back as 202 quickly.

CI runs 8 cases per operation and mode (about a minute); `VERIFIER_FUZZ_EXAMPLES=200 pytest
tests/e2e/test_api_fuzz.py` is the long form.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from support import Service, start_service

EXAMPLES = int(os.environ.get("VERIFIER_FUZZ_EXAMPLES", "8"))


@pytest.fixture(scope="module")
def fuzz_service(
    tmp_path_factory: pytest.TempPathFactory, pg_url: str, redis_url: str
) -> Iterator[Service]:
    service = start_service(
        tmp_path_factory.mktemp("fuzz"),
        "ladder,tier.fast,callbacks,review",
        VERIFIER_DATABASE__URL=pg_url,
        VERIFIER_BROKER__URL=redis_url,
        VERIFIER_API__MAX_WAIT_S="1",
    )
    yield service
    service.stop_all()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_input_gets_a_server_error(fuzz_service: Service, mode: GenerationMode) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzz_service.base_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10  # the whole API, not an empty document
    unfuzzable: list[str] = []
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: schemathesis.Case) -> None:
            response = case.call(
                base_url=fuzz_service.base_url, timeout=15, headers=fuzz_service.auth_headers
            )
            case.validate_response(response, checks=[not_a_server_error])

        try:
            check()
        except Unsatisfiable:
            # Nothing to get wrong: an operation without parameters or body has no invalid
            # variant; every other operation must be fuzzed.
            unfuzzable.append(operation.label)
    assert all(label.startswith("GET ") for label in unfuzzable), unfuzzable
    if mode == GenerationMode.POSITIVE:
        assert unfuzzable == []
