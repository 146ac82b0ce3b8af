"""The service the console tests share: its own database and Redis, so every count is exact,
and two jobs (two trainers, one of them sending the other's molecules again) already run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from console_support import Console, private_console, unique_smiles


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
    with private_console(tmp_path_factory, "console") as state:
        smiles = [unique_smiles() for _ in range(3)]
        for n, principal in enumerate(("trainer-a", "trainer-b")):
            key = state.service.create_key(principal, "trainer")
            with state.service.client(api_key=key) as client:
                # The second trainer sends the same molecules: its verdicts come from the cache.
                answer = client.post("/v1/rewards", json=_request(smiles, "N" * (n + 1)))
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "completed"
            state.jobs.append(answer.json())
            state.principals.append(principal)
        yield state
