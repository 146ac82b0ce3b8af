"""The asynchronous client (httpx.AsyncClient); the same calls as VerifierClient, awaited."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Any

import httpx

from verifier_service.client import _base
from verifier_service.client._base import (
    Attempts,
    Call,
    ClientCore,
    ItemLike,
    PollPolicy,
    RetryPolicy,
)
from verifier_service.client.sse import reward_of
from verifier_service.wire.events import ChangesPage, JobEventOut
from verifier_service.wire.jobs import JobOut
from verifier_service.wire.rewards import Reward


class AsyncVerifierClient(ClientCore):
    """Async client of the reward API: submit items, wait for or stream their rewards.

    Connection errors, 5xx and 429 answers are retried with backoff; every POST carries an
    Idempotency-Key (generated when the caller gives none), so a retried POST never scores twice.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        principal: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        poll: PollPolicy | None = None,
        batch_size: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url, principal=principal, api_key=api_key, timeout_s=timeout_s, retry=retry,
            poll=poll, batch_size=batch_size,
        )  # fmt: skip
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout_s, transport=transport,
            headers=self.default_headers(),
        )  # fmt: skip

    async def __aenter__(self) -> AsyncVerifierClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call) -> httpx.Response:
        """One request, retried after connection errors, 5xx and 429 until the retry policy
        gives up; the last answer (raised for by the caller) or the last connection error."""
        attempts = Attempts(self, call)
        while True:
            outcome: httpx.Response | httpx.TransportError
            try:
                outcome = await self._http.request(
                    call.method, call.path, json=call.json, headers=call.headers,
                    timeout=call.timeout,
                )  # fmt: skip
            except httpx.TransportError as exc:
                outcome = exc
            after = attempts.after(outcome)
            if isinstance(after, httpx.Response):
                return after
            await asyncio.sleep(after)

    async def _job(self, call: Call) -> JobOut:
        return _base.job_from(await self._send(call))

    async def submit(
        self,
        items: Sequence[ItemLike],
        *,
        policy: str = "default",
        wait_s: float | None = None,
        deadline_s: float | None = None,
        idempotency_key: str | None = None,
        verdicts: bool = True,
    ) -> JobOut:
        """POST /v1/rewards once: the job, completed if its rewards were ready within wait_s
        (its items' verdicts left out, so empty, if not `verdicts`)."""
        return await self._job(self.submit_call(
            items, policy=policy, wait_s=wait_s, deadline_s=deadline_s,
            idempotency_key=idempotency_key, verdicts=verdicts,
        ))  # fmt: skip

    async def get_job(self, job_id: str, *, verdicts: bool = True) -> JobOut:
        """GET /v1/jobs/{id} (its items' verdicts left out, so empty, if not `verdicts`)."""
        return await self._job(self.job_call(job_id, verdicts))

    async def job_cost(self, job_id: str) -> dict[str, Any]:
        """GET /v1/jobs/{id}/cost: the job's cost report (escalations, cost units, cache hits)."""
        return _base.json_object(await self._send(self.cost_call(job_id)))

    async def wait(self, job_id: str, *, timeout_s: float | None = None) -> JobOut:
        """Poll a job with growing intervals until it completes; JobTimeoutError after timeout_s."""
        polling = _base.Polling(self.poll, timeout_s)
        while True:
            job = await self.get_job(job_id)
            interval = polling.after(job)
            if interval is None:
                return job
            await asyncio.sleep(interval)

    async def events(
        self, job_id: str, *, last_event_id: int | None = None, timeout_s: float | None = None
    ) -> AsyncIterator[JobEventOut]:
        """The job's server-sent events until job.finished, resumed with Last-Event-ID after a
        dropped connection; JobTimeoutError after timeout_s."""
        stream = _base.EventStream(self, job_id, last_event_id, timeout_s)
        while True:
            call = stream.call()
            outcome: httpx.Response | httpx.TransportError | None = None
            try:
                async with self._http.stream(
                    call.method, call.path, headers=call.headers, timeout=call.timeout
                ) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        outcome = response
                    else:
                        async for line in response.aiter_lines():
                            event = stream.feed(line)
                            if event is not None:
                                yield event
                                if stream.finished:
                                    return
            except httpx.TransportError as exc:  # dropped, or quiet past the read timeout
                outcome = exc
            if stream.out_of_time():
                raise _base.still_running(await self.get_job(job_id), timeout_s)
            await asyncio.sleep(stream.resume_delay(outcome))

    async def stream(
        self, job_id: str, *, timeout_s: float | None = None
    ) -> AsyncIterator[tuple[int, Reward]]:
        """Yield `(index, reward)` as each item's reward finishes (or is revised), from the job's
        server-sent events; ends when the job finishes."""
        async for event in self.events(job_id, timeout_s=timeout_s):
            pair = reward_of(event)
            if pair is not None:
                yield pair

    async def changes(self, *, since: str | None = None, limit: int = 100) -> ChangesPage:
        """GET /v1/rewards/changes after cursor `since`; pass `page.next` as the next since."""
        return _base.changes_from(await self._send(self.changes_call(since, limit)))

    async def score_jobs(
        self,
        items: Sequence[ItemLike],
        *,
        policy: str = "default",
        timeout_s: float = 120.0,
        deadline_s: float | None = None,
        idempotency_key: str | None = None,
        verdicts: bool = True,
    ) -> list[JobOut]:
        """Submit items in batches of `batch_size` and wait up to timeout_s for all of them
        (without their items' verdicts if not `verdicts`), the batches concurrently.

        Waiting re-sends each batch with its Idempotency-Key and a `wait_s`: the service answers
        the moment the job finishes (a long poll), instead of the client polling on a timer.
        """
        run = _base.Scoring(
            self, items, policy=policy, timeout_s=timeout_s, deadline_s=deadline_s,
            idempotency_key=idempotency_key, verdicts=verdicts,
        )  # fmt: skip

        async def one(i: int) -> JobOut:
            job = await self._job(run.first_call(i, concurrent=True))
            while (call := run.next_call(i, job)) is not None:
                job = await self._job(call)
            return job

        return list(await asyncio.gather(*(one(i) for i in run.indices)))

    async def score(
        self,
        items: Sequence[ItemLike],
        *,
        policy: str = "default",
        timeout_s: float = 120.0,
        deadline_s: float | None = None,
        idempotency_key: str | None = None,
    ) -> list[Reward]:
        """One reward per item, in order; items not finished within timeout_s come back pending."""
        jobs = await self.score_jobs(
            items, policy=policy, timeout_s=timeout_s, deadline_s=deadline_s,
            idempotency_key=idempotency_key, verdicts=False,  # the rewards are all it returns
        )  # fmt: skip
        return _base.all_rewards(jobs, timeout_s)

    async def create_policy(self, text: str, *, activate: bool = True) -> dict[str, Any]:
        """POST /v1/policies with a YAML or JSON policy document; the stored summary."""
        return _base.json_object(await self._send(self.policy_call(text, activate)))
