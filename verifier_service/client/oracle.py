"""For partners of an oracle (a lab, a market): claim batches under a lease, keep the lease with
heartbeats, post results, and check the signature of a batch we pushed.

It needs only httpx and pydantic, like the rest of the client; the protocol it speaks is written
down in docs/oracles.md for partners who do not use Python.

    from verifier_service.client import OraclePartner

    with OraclePartner("lab", "https://verifier.example.org", api_key="vsk_...") as partner:
        partner.serve(measure)  # claim, measure each item under a kept lease, post; repeat
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from verifier_service.client._base import RetryPolicy, raise_for
from verifier_service.client._blocking import BlockingClient
from verifier_service.client.errors import ConflictError
from verifier_service.client.webhooks import TOLERANCE_S, verify_webhook


class BatchItem(BaseModel):
    """One item to measure: quote its `item_id` in the result."""

    model_config = ConfigDict(extra="allow")

    item_id: str
    kind: str
    payload: dict[str, Any]
    reference: dict[str, Any] | None = None


class Batch(BaseModel):
    """A batch of items to measure: the body of a push, or the batch of a claim."""

    model_config = ConfigDict(extra="allow")

    type: str = "oracle.batch"
    oracle: str
    batch_id: str
    created_at: datetime
    due_at: datetime
    result_schema: dict[str, Any]
    results_url: str
    items: list[BatchItem]


class Claim(BaseModel):
    """A claimed batch and the lease that holds it."""

    lease_id: str
    lease_expires_at: datetime
    batch: Batch


class _Lease(BaseModel):
    lease_expires_at: datetime


class Result(BaseModel):
    """One item's result: the measured values, or why it could not be measured."""

    model_config = ConfigDict(extra="forbid")

    item_id: str
    values: dict[str, Any] | None = None
    error: str | None = None


class Posted(BaseModel):
    """What the service did with posted results."""

    accepted: int = Field(description="Results recorded now.")
    duplicates: int = Field(description="Results already recorded with the same content.")


class LeaseLostError(ConflictError):
    """409 lease_lost: the lease expired and another client claimed the batch (or it is done)."""


class MeasurementFailed(Exception):
    """Raised by a measuring function: the item could not be measured; the message goes back
    as the result's error."""


#: A measuring function: one batch item in, its measured values out (or MeasurementFailed).
Measure = Callable[[BatchItem], Mapping[str, Any]]


class OraclePartner(BlockingClient):
    """The partner's side of one oracle: `claim`, `heartbeat`, `post_results` (pull), and
    `verify_signature` for batches we push. Connection errors, 5xx and 429 are retried with
    backoff; posting results again is safe (they are idempotent per item)."""

    def __init__(
        self,
        oracle: str,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        secret: str | None = None,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url, principal=None, api_key=api_key, timeout_s=timeout_s, retry=retry,
            poll=None, batch_size=None, transport=transport,
            headers={"Accept": "application/json"},
        )  # fmt: skip
        self.oracle = oracle
        self.secret = secret

    def _post(self, path: str, body: Any = None) -> httpx.Response:
        return self._request("POST", path, json=body)

    @property
    def _root(self) -> str:
        return f"/v1/oracles/{self.oracle}"

    def claim(self) -> Claim | None:
        """Lease the oldest batch nobody holds; None when no batch waits. Keep the lease with
        `heartbeat` (or `keep_lease`) while measuring: a claim not kept is given to the next
        client `lease_s` after it was made (so is one whose answer was lost on the way and
        retried: the batch comes back after its lease)."""
        answer = self._post(f"{self._root}/claim")
        raise_for(answer)
        return None if answer.status_code == 204 else Claim.model_validate_json(answer.content)

    def heartbeat(self, claim: Claim) -> datetime:
        """Keep a claim's lease; its new expiry (also set on `claim`). LeaseLostError when the
        lease expired and another client holds the batch, or the batch is done."""
        path = f"{self._root}/batches/{claim.batch.batch_id}/heartbeat"
        answer = self._post(path, {"lease_id": claim.lease_id})
        try:
            raise_for(answer)
        except ConflictError as exc:
            if exc.error == "lease_lost":
                raise LeaseLostError(exc.status_code, exc.body) from None
            raise
        expires = _Lease.model_validate_json(answer.content).lease_expires_at
        claim.lease_expires_at = expires
        return expires

    def post_results(self, results: Sequence[Result | Mapping[str, Any]]) -> Posted:
        """Post results (each `values` or `error`); taken whole or refused. A result posted
        again is counted in `duplicates`; a different one for the same item is a ConflictError
        (result_conflict), an unknown item a NotFoundError, values that do not fit the result
        schema an InvalidRequestError naming the field."""
        body = [
            r.model_dump(exclude_none=True) if isinstance(r, Result) else dict(r) for r in results
        ]
        answer = self._post(f"{self._root}/results", {"results": body})
        raise_for(answer)
        return Posted.model_validate_json(answer.content)

    def verify_signature(
        self,
        headers: Mapping[str, str],
        body: bytes | str,
        *,
        secret: str | None = None,
        tolerance_s: float = TOLERANCE_S,
    ) -> Batch:
        """The pushed batch, if the headers sign `body` (the raw request body) with the
        oracle's `whsec_` secret and the timestamp is recent; WebhookVerificationError if not.
        Deduplicate on the `webhook-id` header: a retried push carries the same one."""
        key = secret or self.secret
        if key is None:
            raise ValueError("no secret: give OraclePartner(secret=...) or secret=")
        return Batch.model_validate(verify_webhook(key, headers, body, tolerance_s=tolerance_s))

    @contextmanager
    def keep_lease(self, claim: Claim, every_s: float | None = None) -> Iterator[threading.Event]:
        """Heartbeats on a thread while the block runs (every third of the lease by default).
        The event it yields is set if the lease was lost: results posted after that still
        count, but another client may be measuring the same items."""
        if every_s is None:
            left = (claim.lease_expires_at - datetime.now(UTC)).total_seconds()
            every_s = max(0.2, left / 3)
        done, lost = threading.Event(), threading.Event()

        def beat() -> None:
            while not done.wait(every_s):
                try:
                    self.heartbeat(claim)
                except LeaseLostError:
                    lost.set()
                    return
                except Exception:  # a failed beat: the next one tries again
                    continue

        keeper = threading.Thread(target=beat, name="oracle-lease", daemon=True)
        keeper.start()
        try:
            yield lost
        finally:
            done.set()
            keeper.join(timeout=self.timeout_s)

    def serve_one(self, measure: Measure) -> Posted | None:
        """Claim one batch, measure its items under a kept lease, post their results; None
        when no batch waited. A MeasurementFailed becomes that item's error result."""
        claim = self.claim()
        if claim is None:
            return None
        results: list[Result] = []
        with self.keep_lease(claim):
            for item in claim.batch.items:
                try:
                    results.append(Result(item_id=item.item_id, values=dict(measure(item))))
                except MeasurementFailed as exc:
                    results.append(Result(item_id=item.item_id, error=str(exc) or "failed"))
        return self.post_results(results) if results else Posted(accepted=0, duplicates=0)

    def serve(self, measure: Measure, *, poll_s: float = 30.0, once: bool = False) -> int:
        """Serve batches until stopped (or, with `once`, until none waits): how many batches."""
        served = 0
        while True:
            if self.serve_one(measure) is not None:
                served += 1
                continue
            if once:
                return served
            time.sleep(poll_s)
