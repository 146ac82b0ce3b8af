"""The synchronous client."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from verifier_service.client import _base
from verifier_service.client._base import Call, ItemLike, PollPolicy, RetryPolicy
from verifier_service.client._blocking import BlockingClient
from verifier_service.client.sse import reward_of
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
            base_url, principal=principal, api_key=api_key, timeout_s=timeout_s, retry=retry,
            poll=poll, batch_size=batch_size, transport=transport,
        )  # fmt: skip

    def _job(self, call: Call) -> JobOut:
        return _base.job_from(self._send(call))

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
        return self._job(self.submit_call(
            items, policy=policy, wait_s=wait_s, deadline_s=deadline_s,
            idempotency_key=idempotency_key, verdicts=verdicts,
        ))  # fmt: skip

    def get_job(self, job_id: str, *, verdicts: bool = True) -> JobOut:
        """GET /v1/jobs/{id} (its items' verdicts left out, so empty, if not `verdicts`)."""
        return self._job(self.job_call(job_id, verdicts))

    def job_cost(self, job_id: str) -> dict[str, Any]:
        """GET /v1/jobs/{id}/cost: the job's cost report (escalations, cost units, cache hits)."""
        return _base.json_object(self._send(self.cost_call(job_id)))

    def wait(self, job_id: str, *, timeout_s: float | None = None) -> JobOut:
        """Poll a job with growing intervals until it completes; JobTimeoutError after timeout_s."""
        polling = _base.Polling(self.poll, timeout_s)
        while True:
            job = self.get_job(job_id)
            interval = polling.after(job)
            if interval is None:
                return job
            time.sleep(interval)

    def events(
        self, job_id: str, *, last_event_id: int | None = None, timeout_s: float | None = None
    ) -> Iterator[JobEventOut]:
        """The job's server-sent events (item.finished, item.revised, job.finished) until
        job.finished. A dropped connection is resumed with Last-Event-ID (retried as any
        request); JobTimeoutError after timeout_s."""
        stream = _base.EventStream(self, job_id, last_event_id, timeout_s)
        while True:
            call = stream.call()
            outcome: httpx.Response | httpx.TransportError | None = None
            try:
                with self._http.stream(
                    call.method, call.path, headers=call.headers, timeout=call.timeout
                ) as response:
                    if response.status_code >= 400:
                        response.read()
                        outcome = response
                    else:
                        for line in response.iter_lines():
                            event = stream.feed(line)
                            if event is not None:
                                yield event
                                if stream.finished:
                                    return
            except httpx.TransportError as exc:  # dropped, or quiet past the read timeout
                outcome = exc
            if stream.out_of_time():
                raise _base.still_running(self.get_job(job_id), timeout_s)
            time.sleep(stream.resume_delay(outcome))

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
        return _base.changes_from(self._send(self.changes_call(since, limit)))

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
        (without their items' verdicts if not `verdicts`), one batch after another.

        Waiting re-sends each batch with its Idempotency-Key and a `wait_s`: the service answers
        the moment the job finishes (a long poll), instead of the client polling on a timer.
        """
        run = _base.Scoring(
            self, items, policy=policy, timeout_s=timeout_s, deadline_s=deadline_s,
            idempotency_key=idempotency_key, verdicts=verdicts,
        )  # fmt: skip
        jobs = [self._job(run.first_call(i, concurrent=False)) for i in run.indices]
        for i, job in enumerate(jobs):
            while (call := run.next_call(i, job)) is not None:
                job = self._job(call)
            jobs[i] = job
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
            items, policy=policy, timeout_s=timeout_s, deadline_s=deadline_s,
            idempotency_key=idempotency_key, verdicts=False,  # the rewards are all it returns
        )  # fmt: skip
        return _base.all_rewards(jobs, timeout_s)

    def create_policy(self, text: str, *, activate: bool = True) -> dict[str, Any]:
        """POST /v1/policies with a YAML or JSON policy document; the stored summary."""
        return _base.json_object(self._send(self.policy_call(text, activate)))
