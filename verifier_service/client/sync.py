"""The synchronous client."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlencode

import httpx

from verifier_service.client import _base
from verifier_service.client._base import ItemLike, PollPolicy, RetryPolicy
from verifier_service.client._blocking import BlockingClient
from verifier_service.client.sse import SseParser, StreamState, reward_of
from verifier_service.wire.events import ChangesPage, JobEventOut, RewardChange
from verifier_service.wire.jobs import JobOut
from verifier_service.wire.rewards import Reward


class VerifierClient(BlockingClient):
    """Blocking client of the reward API: submit items, wait for or stream their rewards.

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
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            principal=principal,
            api_key=api_key,
            timeout_s=timeout_s,
            retry=retry,
            poll=poll,
            batch_size=batch_size,
            transport=transport,
        )

    def submit(
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
        body = _base.reward_body(items, policy, wait_s, deadline_s)
        key = idempotency_key or _base.new_key()
        response = self._request(
            "POST",
            _base.with_verdicts("/v1/rewards", verdicts),
            json=body,
            headers=_base.headers(self.principal, key),
            read_timeout_s=(wait_s or 0) + self.timeout_s,
        )
        return _base.job_from(response)

    def get_job(self, job_id: str, *, verdicts: bool = True) -> JobOut:
        """GET /v1/jobs/{id} (its items' verdicts left out, so empty, if not `verdicts`)."""
        response = self._request(
            "GET",
            _base.with_verdicts(f"/v1/jobs/{job_id}", verdicts),
            headers=_base.headers(self.principal, None),
        )
        return _base.job_from(response)

    def job_cost(self, job_id: str) -> dict[str, Any]:
        """GET /v1/jobs/{id}/cost: the job's cost report (escalations, cost units, cache hits)."""
        response = self._request(
            "GET", f"/v1/jobs/{job_id}/cost", headers=_base.headers(self.principal, None)
        )
        _base.raise_for(response)
        report: dict[str, Any] = response.json()
        return report

    def wait(self, job_id: str, *, timeout_s: float | None = None) -> JobOut:
        """Poll a job with growing intervals until it completes; JobTimeoutError after timeout_s."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for interval in self.poll.intervals():
            job = self.get_job(job_id)
            if job.status == "completed":
                return job
            if deadline is not None and time.monotonic() + interval > deadline:
                raise _base.still_running(job, timeout_s)
            time.sleep(interval)
        raise AssertionError("unreachable")

    def events(
        self, job_id: str, *, last_event_id: int | None = None, timeout_s: float | None = None
    ) -> Iterator[JobEventOut]:
        """The job's server-sent events (item.finished, item.revised, job.finished) until
        job.finished. A dropped connection is resumed with Last-Event-ID (retried as any
        request); JobTimeoutError after timeout_s."""
        state = StreamState(job_id, last_event_id, timeout_s)
        while True:
            outcome: httpx.Response | httpx.TransportError | None = None
            try:
                with self._http.stream(
                    "GET",
                    state.path,
                    headers=state.headers(_base.headers(self.principal, None)),
                    timeout=state.timeout(self.timeout_s),
                ) as response:
                    if response.status_code >= 400:
                        response.read()
                        outcome = response
                    else:
                        parser = SseParser()
                        for line in response.iter_lines():
                            event = parser.feed(line)
                            if event is not None:
                                state.seen(event)
                                yield event
                                if event.type == "job.finished":
                                    return
            except httpx.TransportError as exc:  # dropped, or quiet past the read timeout
                outcome = exc
            if state.out_of_time():
                raise _base.still_running(self.get_job(job_id), timeout_s)
            delay: float | None = self.retry.delay(state.attempt)  # ended early: resume
            if outcome is not None:
                delay = self.retry_delay(state.attempt, f"GET {state.path}", outcome, state.started)
                if delay is None:
                    assert isinstance(outcome, httpx.Response)
                    _base.raise_for(outcome)
            time.sleep(delay or 0.0)
            state.attempt += 1

    def stream(
        self, job_id: str, *, timeout_s: float | None = None
    ) -> Iterator[tuple[int, Reward]]:
        """Yield `(index, reward)` as each item's reward finishes (or is revised), from the job's
        server-sent events; ends when the job finishes (items left `pending` for reviewers come
        as such, and again later through changes())."""
        for event in self.events(job_id, timeout_s=timeout_s):
            pair = reward_of(event)
            if pair is not None:
                yield pair

    def changes(self, *, since: str | None = None, limit: int = 100) -> ChangesPage:
        """GET /v1/rewards/changes: rewards finished or revised after cursor `since` (None: from
        the start, "now": from now on), of this key's jobs; pass `page.next` as the next since."""
        params: dict[str, str | int] = {"limit": limit}
        if since is not None:
            params["since"] = since
        response = self._request(
            "GET", f"/v1/rewards/changes?{urlencode(params)}",
            headers=_base.headers(self.principal, None),
        )  # fmt: skip
        _base.raise_for(response)
        return ChangesPage.model_validate_json(response.content)

    def iter_changes(self, *, since: str | None = None) -> Iterator[RewardChange]:
        """Every change after `since` until caught up (keep the last `cursor` for next time)."""
        while True:
            page = self.changes(since=since)
            yield from page.changes
            if not page.changes:
                return
            since = page.next

    def score_jobs(
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
        (without their items' verdicts if not `verdicts`).

        Waiting re-sends each batch with its Idempotency-Key and a `wait_s`: the service answers
        the moment the job finishes (a long poll), instead of the client polling on a timer.
        """
        start = time.monotonic()
        batches = _base.chunks(items, self.batch_size)
        keys = _base.batch_keys(idempotency_key or _base.new_key(), len(batches))
        first_wait = _base.long_poll_s(timeout_s) if len(batches) == 1 else None
        jobs = [
            self.submit(
                batch,
                policy=policy,
                wait_s=first_wait,
                deadline_s=deadline_s,
                idempotency_key=key,
                verdicts=verdicts,
            )
            for batch, key in zip(batches, keys, strict=True)
        ]
        for index, job in enumerate(jobs):
            while job.status != "completed":
                left = timeout_s - (time.monotonic() - start)
                if left <= 0:
                    break
                job = self.submit(
                    batches[index],
                    policy=policy,
                    wait_s=_base.long_poll_s(left),
                    deadline_s=deadline_s,
                    idempotency_key=keys[index],
                    verdicts=verdicts,
                )
            jobs[index] = job
        return jobs

    def score(
        self,
        items: Sequence[ItemLike],
        *,
        policy: str = "default",
        timeout_s: float = 120.0,
        deadline_s: float | None = None,
        idempotency_key: str | None = None,
    ) -> list[Reward]:
        """One reward per item, in order; items not finished within timeout_s come back pending."""
        jobs = self.score_jobs(
            items,
            policy=policy,
            timeout_s=timeout_s,
            deadline_s=deadline_s,
            idempotency_key=idempotency_key,
            verdicts=False,  # the rewards are all it returns
        )
        return [r for job in jobs for r in _base.rewards_of(job, timeout_s)]

    def create_policy(self, text: str, *, activate: bool = True) -> dict[str, Any]:
        """POST /v1/policies with a YAML or JSON policy document; the stored summary."""
        response = self._request(
            "POST",
            "/v1/policies",
            json={"text": text, "activate": activate},
            headers=_base.headers(self.principal, None),
        )
        _base.raise_for(response)
        summary: dict[str, Any] = response.json()
        return summary
