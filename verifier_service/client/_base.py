"""What the sync and async clients share: request bodies, retry timing, response parsing."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel

from verifier_service.client.errors import (
    APIError,
    JobTimeoutError,
    ServiceConnectionError,
    error_for,
)
from verifier_service.client.settings import ClientSettings
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


class ClientCore:
    """What the blocking and the async client share: their settings, and every decision that
    needs no I/O (when to retry, when a wait has run out, which rewards are new)."""

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


def finished(item: ItemOut) -> bool:
    return item.reward is not None and item.reward.status != RewardStatus.pending


__all__ = ["APIError"]
