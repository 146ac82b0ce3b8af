"""An open events stream holds only while its credential does: a key revoked, or a session signed
out, while the stream waits for a job's rewards closes the stream before they come. Through the
live API and worker on PostgreSQL and Redis."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest
from auth_support import new_person, sign_in
from support import Service, fresh_molecules

DEADLINE_S = 12.0
CHECK_S = 2.0  # webhooks.stream_auth_check_s, the default


def _slow_policy(service: Service) -> str:
    """Items climb to chem.dft, whose queue no worker here consumes: they finish at the job's
    deadline."""
    name = f"stream-auth-{uuid.uuid4().hex[:6]}"
    with service.client() as admin:
        created = admin.post("/v1/policies", json={"text": (
            f"name: {name}\n"
            "ladders: {molecule: [{tier: chem.fast}, {tier: chem.dft}]}\n"
            "reward: {molecule: {components: [{name: qed, tier: chem.fast, component: qed}]}}\n"
        )})  # fmt: skip
        assert created.status_code in (200, 201), created.text
    return name


def _body(policy: str) -> dict[str, Any]:
    items = [{"kind": "molecule", "payload": {"smiles": s}} for s in fresh_molecules(2)]
    return {"policy": policy, "items": items, "deadline_s": DEADLINE_S}


def _read_until_closed(
    stream: httpx.Response, opened: float, cut_off: Any
) -> tuple[list[str], float]:
    """The stream's `event:` lines until it closes; `cut_off()` is called once the first
    line (the retry hint) arrived. The seconds from `opened` to the close."""
    events: list[str] = []
    for line in stream.iter_lines():
        if line.startswith("retry:"):
            cut_off()
        elif line.startswith("event:"):
            events.append(line)
    return events, time.monotonic() - opened


@pytest.mark.parametrize("credential", ["key", "session"])
def test_a_stream_closes_when_its_credential_is_revoked(
    live_service: Service, credential: str
) -> None:
    policy = _slow_policy(live_service)
    if credential == "key":
        key = live_service.create_key(f"stream-{uuid.uuid4().hex[:6]}", "trainer")
        headers = {"Authorization": f"Bearer {key}"}
        write_headers = headers
        prefix = key[: len("vsk_") + 12]

        def cut_off() -> None:
            with live_service.client() as admin:
                assert admin.post(f"/v1/keys/{prefix}/revoke").status_code == 200
    else:
        person = sign_in(live_service.base_url, new_person(live_service, "trainer"))
        headers, write_headers = person.headers(), person.headers(write=True)

        def cut_off() -> None:
            signed_out = httpx.post(
                f"{live_service.base_url}/signout", data={"csrf_token": person.token},
                headers=person.headers(), timeout=10,
            )  # fmt: skip
            assert signed_out.status_code == 303

    with httpx.Client(base_url=live_service.base_url, timeout=30) as http:
        submitted = http.post("/v1/rewards", json=_body(policy), headers=write_headers)
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["id"]
        opened = time.monotonic()
        with http.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers) as stream:
            assert stream.status_code == 200
            events, closed_after = _read_until_closed(stream, opened, cut_off)

        # Closed within a few checks, long before the job's deadline brings its rewards,
        # and none of them was sent.
        assert events == []
        assert closed_after < DEADLINE_S - 2, f"stream open {closed_after:.1f} s"
        # Resuming says why.
        again = http.get(f"/v1/jobs/{job_id}/events", headers=headers)
        assert again.status_code == 401
