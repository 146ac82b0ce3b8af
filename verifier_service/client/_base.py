"""What the sync and async clients share: every decision that needs no I/O.

The requests they send (paths, bodies, headers, timeouts), the answers they parse, when to
retry, when a wait has run out, how score_jobs splits and long-polls its batches, and where a
resumable event stream is. Each client keeps only its loops that block or await."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
from pydantic import BaseModel

from verifier_service.client.errors import (
    APIError,
    JobTimeoutError,
    ServiceConnectionError,
    error_for,
)
from verifier_service.client.settings import ClientSettings
from verifier_service.client.sse import SseParser, StreamState
from verifier_service.wire.events import ChangesPage, JobEventOut
from verifier_service.wire.jobs import ItemOut, JobOut
from verifier_service.wire.rewards import Reward, RewardStatus

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
ItemLike = Mapping[str, Any] | BaseModel


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter for connection errors, 5xx and 429.

    A request is retried at least `retries` times, and beyond that for as long as `ride_out_s`
    has not passed since its first attempt: long enough, by default, to ride out a restart of
    the API (killed, then up again within a minute) without failing a training step. Every
    retry of a POST carries the same Idempotency-Key, so nothing is scored twice.
    """

    retries: int = 4
    backoff_s: float = 0.25
    max_backoff_s: float = 8.0
    ride_out_s: float = 90.0

    def gives_up(self, attempt: int, elapsed_s: float) -> bool:
        """Whether attempt `attempt` (0-based), `elapsed_s` after the first, was the last."""
        return attempt >= self.retries and elapsed_s >= self.ride_out_s

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after is not None:
            try:
                return min(float(retry_after), self.max_backoff_s)
            except ValueError:
                pass
        base: float = min(self.backoff_s * 2.0**attempt, self.max_backoff_s)
        return base * (0.5 + random.random() / 2)  # jitter: many trainers must not retry in step


@dataclass(frozen=True)
class PollPolicy:
    """How often to poll a running job: from `first_s`, growing by `factor` up to `max_s`."""

    first_s: float = 0.1
    factor: float = 1.5
    max_s: float = 2.0

    def intervals(self) -> Iterator[float]:
        interval = self.first_s
        while True:
            yield interval
            interval = min(interval * self.factor, self.max_s)


@dataclass(frozen=True)
class Call:
    """One request as a client sends it: everything but the sending."""

    method: str
    path: str
    headers: dict[str, str] | None
    timeout: httpx.Timeout
    json: Any = None


class ClientCore:
    """What the blocking and the async client share: their settings, the requests they send
    (`*_call`) and when to retry them."""

    def __init__(
        self,
        base_url: str | None,
        *,
        principal: str | None,
        api_key: str | None,
        timeout_s: float,
        retry: RetryPolicy | None,
        poll: PollPolicy | None,
        batch_size: int | None,
    ) -> None:
        settings = ClientSettings()
        self.base_url = (base_url or settings.base_url).rstrip("/")
        self.principal = principal if principal is not None else settings.principal
        if api_key is None and settings.api_key is not None:
            api_key = settings.api_key.get_secret_value()
        self._api_key = api_key
        self.retry = retry or RetryPolicy(retries=settings.retries, ride_out_s=settings.ride_out_s)
        self.poll = poll or PollPolicy()
        self.batch_size = batch_size or settings.batch_size
        self.timeout_s = timeout_s

    def default_headers(self) -> dict[str, str]:
        """Headers of every request: the API key, when there is one."""
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def retry_delay(
        self,
        attempt: int,
        what: str,
        outcome: httpx.Response | httpx.TransportError,
        started: float,
    ) -> float | None:
        """Seconds to wait before attempt `attempt + 1` of request `what` (first sent at
        `started`, time.monotonic()); None when `outcome` is the answer. A connection error with
        no retries left raises ServiceConnectionError."""
        elapsed_s = time.monotonic() - started
        if isinstance(outcome, httpx.TransportError):
            if self.retry.gives_up(attempt, elapsed_s):
                raise ServiceConnectionError(
                    f"{what} failed after {attempt + 1} attempts in {elapsed_s:.1f} s: "
                    f"{type(outcome).__name__}: {outcome}"
                ) from outcome
            return self.retry.delay(attempt)
        if not should_retry(outcome) or self.retry.gives_up(attempt, elapsed_s):
            return None
        return self.retry.delay(attempt, outcome.headers.get("Retry-After"))

    def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        headers: dict[str, str] | None = None,
        read_timeout_s: float | None = None,
    ) -> Call:
        timeout = httpx.Timeout(self.timeout_s if read_timeout_s is None else read_timeout_s)
        return Call(method, path, headers, timeout, json)

    def submit_call(
        self,
        items: Iterable[ItemLike],
        *,
        policy: str,
        wait_s: float | None,
        deadline_s: float | None,
        idempotency_key: str | None,
        verdicts: bool,
    ) -> Call:
        """POST /v1/rewards, read for as long as the service may wait (wait_s) and then some."""
        return self.call(
            "POST",
            with_verdicts("/v1/rewards", verdicts),
            json=reward_body(items, policy, wait_s, deadline_s),
            headers=headers(self.principal, idempotency_key or new_key()),
            read_timeout_s=(wait_s or 0) + self.timeout_s,
        )

    def job_call(self, job_id: str, verdicts: bool) -> Call:
        path = with_verdicts(f"/v1/jobs/{job_id}", verdicts)
        return self.call("GET", path, headers=headers(self.principal, None))

    def cost_call(self, job_id: str) -> Call:
        return self.call("GET", f"/v1/jobs/{job_id}/cost", headers=headers(self.principal, None))

    def changes_call(self, since: str | None, limit: int) -> Call:
        params: dict[str, str | int] = {"limit": limit}
        if since is not None:
            params["since"] = since
        path = f"/v1/rewards/changes?{urlencode(params)}"
        return self.call("GET", path, headers=headers(self.principal, None))

    def policy_call(self, text: str, activate: bool) -> Call:
        body = {"text": text, "activate": activate}
        return self.call("POST", "/v1/policies", json=body, headers=headers(self.principal, None))


class Attempts:
    """Where one request's retries are: which attempt, since when, and what comes next."""

    def __init__(self, core: ClientCore, call: Call) -> None:
        self.core = core
        self.what = f"{call.method} {core.base_url}{call.path}"
        self.attempt = 0
        self.started = time.monotonic()

    def after(self, outcome: httpx.Response | httpx.TransportError) -> httpx.Response | float:
        """The answer to return, or the seconds to wait before the next attempt (a connection
        error with no retries left raises ServiceConnectionError)."""
        delay = self.core.retry_delay(self.attempt, self.what, outcome, self.started)
        if delay is None:
            assert isinstance(outcome, httpx.Response)
            return outcome
        self.attempt += 1
        return delay


class Polling:
    """The clock of `wait`: intervals growing as the PollPolicy says, up to timeout_s."""

    def __init__(self, poll: PollPolicy, timeout_s: float | None) -> None:
        self.timeout_s = timeout_s
        self.deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self._intervals = poll.intervals()

    def after(self, job: JobOut) -> float | None:
        """Seconds to wait before polling `job` again; None once it completed. JobTimeoutError
        when the next poll would come after timeout_s."""
        if job.status == "completed":
            return None
        interval = next(self._intervals)
        if self.deadline is not None and time.monotonic() + interval > self.deadline:
            raise still_running(job, self.timeout_s)
        return interval


class Scoring:
    """The bookkeeping of one score_jobs: the batches of `batch_size` items, their
    Idempotency-Keys (one key per batch, the same on every long poll of it) and the time left.

    Waiting re-sends a batch with its key and a `wait_s`: the service answers the moment the
    job finishes (a long poll), instead of the client polling on a timer.
    """

    def __init__(
        self,
        core: ClientCore,
        items: Sequence[ItemLike],
        *,
        policy: str,
        timeout_s: float,
        deadline_s: float | None,
        idempotency_key: str | None,
        verdicts: bool,
    ) -> None:
        self.started = time.monotonic()
        self.core = core
        self.batches = chunks(items, core.batch_size)
        self.keys = batch_keys(idempotency_key or new_key(), len(self.batches))
        self.policy = policy
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
        self.verdicts = verdicts

    @property
    def indices(self) -> range:
        return range(len(self.batches))

    def first_call(self, index: int, *, concurrent: bool) -> Call:
        """The first POST of batch `index`. Batches sent one after another long-poll only when
        there is one (the next batch must not wait on the first); concurrent ones always."""
        wait_s = long_poll_s(self.timeout_s) if concurrent or len(self.batches) == 1 else None
        return self._call(index, wait_s)

    def next_call(self, index: int, job: JobOut) -> Call | None:
        """The long poll that waits on for batch `index`'s `job`; None once it completed or
        timeout_s has passed."""
        if job.status == "completed":
            return None
        left = self.timeout_s - (time.monotonic() - self.started)
        return None if left <= 0 else self._call(index, long_poll_s(left))

    def _call(self, index: int, wait_s: float | None) -> Call:
        return self.core.submit_call(
            self.batches[index], policy=self.policy, wait_s=wait_s, deadline_s=self.deadline_s,
            idempotency_key=self.keys[index], verdicts=self.verdicts,
        )  # fmt: skip


class EventStream:
    """The bookkeeping of one resumable `events` stream: the request that (re)opens it, the
    events parsed from its lines, and what to do when it ends before job.finished."""

    def __init__(
        self, core: ClientCore, job_id: str, last_event_id: int | None, timeout_s: float | None
    ) -> None:
        self.core = core
        self.state = StreamState(job_id, last_event_id, timeout_s)
        self.parser = SseParser()
        self.finished = False

    def call(self) -> Call:
        """The GET that opens the stream (again, after the last event seen)."""
        self.parser = SseParser()
        state = self.state
        base = headers(self.core.principal, None)
        return Call("GET", state.path, state.headers(base), state.timeout(self.core.timeout_s))

    def feed(self, line: str) -> JobEventOut | None:
        """One line of the stream: the event it completes, if any."""
        event = self.parser.feed(line)
        if event is not None:
            self.state.seen(event)
            self.finished = event.type == "job.finished"
        return event

    def out_of_time(self) -> bool:
        return self.state.out_of_time()

    def resume_delay(self, outcome: httpx.Response | httpx.TransportError | None) -> float:
        """Seconds to wait before reopening a stream that ended with `outcome` (an error answer
        or a connection error; None when it just ended early). An error answer that is not
        retried, or a connection error with no retries left, raises."""
        state = self.state
        delay: float | None = self.core.retry.delay(state.attempt)
        if outcome is not None:
            what = f"GET {state.path}"
            delay = self.core.retry_delay(state.attempt, what, outcome, state.started)
            if delay is None:
                assert isinstance(outcome, httpx.Response)
                raise_for(outcome)
        state.attempt += 1
        return delay or 0.0


def still_running(job: JobOut, timeout_s: float | None) -> JobTimeoutError:
    """The error for a job that did not finish within timeout_s, with its warnings."""
    return JobTimeoutError(
        f"job {job.id} still running after {timeout_s:g} s "
        f"({job.n_done}/{job.n_items} items done)"
        + "".join(f"; {warning}" for warning in job.warnings),
        job_id=job.id,
    )


def newly_final(job: JobOut, seen: set[int]) -> list[tuple[int, Reward]]:
    """Rewards of `job` not yet in `seen` that are final (all of them once it completed); adds
    their indices to `seen`."""
    out = []
    for item in job.items:
        if item.index in seen or item.reward is None:
            continue
        if finished(item) or job.status == "completed":
            seen.add(item.index)
            out.append((item.index, item.reward))
    return out


def item_dict(item: ItemLike) -> dict[str, Any]:
    if isinstance(item, BaseModel):
        return item.model_dump(mode="json", exclude_none=True)
    return dict(item)


def reward_body(
    items: Iterable[ItemLike], policy: str, wait_s: float | None, deadline_s: float | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"policy": policy, "items": [item_dict(i) for i in items]}
    if wait_s is not None:
        body["wait_s"] = wait_s
    if deadline_s is not None:
        body["deadline_s"] = deadline_s
    return body


def headers(principal: str | None, idempotency_key: str | None) -> dict[str, str]:
    out = {"Accept": "application/json"}
    if principal:
        out["X-Principal"] = principal
    if idempotency_key:
        out["Idempotency-Key"] = idempotency_key
    return out


def new_key() -> str:
    # Every submission carries a key, so retrying a POST after a lost answer cannot score twice.
    return uuid.uuid4().hex


def batch_keys(key: str, n_batches: int) -> list[str]:
    return [key] if n_batches == 1 else [f"{key}/{i}" for i in range(n_batches)]


def chunks(items: Sequence[ItemLike], size: int) -> list[Sequence[ItemLike]]:
    return [items[i : i + size] for i in range(0, len(items), size)] or [items]


LONG_POLL_MAX_S = 60.0


def long_poll_s(left_s: float) -> float:
    """wait_s for one long-poll request: what is left, capped below the service's limit."""
    return max(0.0, min(left_s, LONG_POLL_MAX_S))


def should_retry(response: httpx.Response) -> bool:
    return response.status_code in RETRY_STATUSES


def raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"error": "http_error", "message": response.text[:500] or response.reason_phrase}
    raise error_for(response.status_code, body)


def job_from(response: httpx.Response) -> JobOut:
    raise_for(response)
    # From the bytes: about half the time of json.loads, then validating the dict.
    return JobOut.model_validate_json(response.content)


def with_verdicts(path: str, verdicts: bool) -> str:
    """`path`, asking the service to leave the items' verdicts out unless `verdicts`."""
    return path if verdicts else f"{path}?verdicts=false"


def not_ready(job_id: str, waited_s: float | None) -> Reward:
    """The reward the client reports for an item whose ladder has not finished yet."""
    when = f"within {waited_s:g} s" if waited_s is not None else "yet"
    return Reward(
        value=None,
        status=RewardStatus.pending,
        reason=f"not finished {when}; poll GET /v1/jobs/{job_id}",
    )


def rewards_of(job: JobOut, waited_s: float | None = None) -> list[Reward]:
    """One reward per item of a job, in order; running items come back `pending`."""
    return [i.reward if i.reward is not None else not_ready(job.id, waited_s) for i in job.items]


def all_rewards(jobs: Iterable[JobOut], waited_s: float | None) -> list[Reward]:
    """One reward per item of the jobs of one score_jobs, in order."""
    return [r for job in jobs for r in rewards_of(job, waited_s)]


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The JSON object of an answer (raised for when it is an error)."""
    raise_for(response)
    body: dict[str, Any] = response.json()
    return body


def changes_from(response: httpx.Response) -> ChangesPage:
    raise_for(response)
    return ChangesPage.model_validate_json(response.content)


def finished(item: ItemOut) -> bool:
    return item.reward is not None and item.reward.status != RewardStatus.pending


__all__ = ["APIError"]
