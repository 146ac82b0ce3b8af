"""The service the console tests share: its own database and Redis, so every count is exact,
and two jobs (two trainers, one of them sending the other's molecules again) already run."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from console_support import OPERATOR_PASSWORD, Console, unique_smiles
from support import private_backends, start_service


def _request(smiles: list[str], tag: str) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"kind": "molecule", "payload": {"smiles": s}} for s in smiles]
    items.append({"kind": "molecule", "payload": {"smiles": f"C1CC{tag}"}})  # unclosed ring
    items.append(
        {
            "kind": "json",
            "payload": {"tool": "search", "args": {"q": tag}},
            "reference": {"schema": {"type": "object", "required": ["tool", "args"]}},
        }
    )
    return {"policy": "default", "items": items, "wait_s": 30}


@pytest.fixture(scope="package")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with private_backends("console") as (pg_url, redis_url):
        service = start_service(
            tmp_path_factory.mktemp("console"),
            "ladder,tier.fast,callbacks",
            VERIFIER_DATABASE__URL=pg_url,
            VERIFIER_BROKER__URL=redis_url,
        )
        try:
            operator = f"op-{uuid.uuid4().hex[:6]}"
            made = service.cli(
                "users", "create", "--role", "operator", operator, stdin=OPERATOR_PASSWORD + "\n"
            )
            assert made.returncode == 0, made.stderr
            state = Console(service=service, operator=operator)
            smiles = [unique_smiles() for _ in range(3)]
            for n, principal in enumerate(("trainer-a", "trainer-b")):
                key = service.create_key(principal, "trainer")
                with service.client(api_key=key) as client:
                    # The second trainer sends the same molecules: its verdicts come from the cache.
                    answer = client.post("/v1/rewards", json=_request(smiles, "N" * (n + 1)))
                assert answer.status_code == 200, answer.text
                assert answer.json()["status"] == "completed"
                state.jobs.append(answer.json())
                state.principals.append(principal)
            yield state
        finally:
            service.stop_all()
