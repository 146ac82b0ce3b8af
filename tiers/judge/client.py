"""Calls to an OpenAI-compatible chat-completions endpoint: bounded in flight, rate limited,
retried on 429/5xx/no answer with backoff that honours Retry-After, behind a circuit breaker.

The breaker and the rate limiter live for the process (a Celery prefork child judges batch after
batch); the HTTP client and the in-flight bound live for one batch's event loop.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from tiers.judge.settings import JudgeEndpoint, JudgeSettings

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: Errors that mean the endpoint is down or overloaded: worth waiting for, within a deadline.
WAITABLE = frozenset({"endpoint_failed", "endpoint_unavailable"})


class EndpointError(Exception):
    """A call that got no usable answer (after its retries); the message names the endpoint."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Completion:
    """The judge's reply text and the tokens it cost."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    #: The reply's token log-probabilities (`choices[0].logprobs.content`), when the server
    #: sent them.
    logprobs: list[dict[str, Any]] | None = None
    #: The model that answered: the response's `model`, else the endpoint's configured one.
    model: str = ""


class CircuitBreaker:
    """Opens after `failures` consecutive failed tries (of any call); while open, calls fail at
    once; after `reset_s` one trial call goes through (half open), and its first try closes or
    reopens it."""

    def __init__(self, failures: int, reset_s: float) -> None:
        self.failures = failures
        self.reset_s = reset_s
        self._lock = threading.Lock()
        self._count = 0
        self._opened_at: float | None = None
        self._trial = False
        self.last_error = ""

    def allow(self) -> bool:
        with self._lock:
            if self._opened_at is None:
                return True
            if time.monotonic() - self._opened_at >= self.reset_s and not self._trial:
                self._trial = True
                return True
            return False

    def succeeded(self) -> None:
        with self._lock:
            self._count, self._opened_at, self._trial = 0, None, False

    def failed(self, error: str) -> None:
        with self._lock:
            self._count += 1
            self.last_error = error
            if self._trial or self._count >= self.failures:
                self._opened_at, self._trial = time.monotonic(), False

    @property
    def open(self) -> bool:
        with self._lock:
            return self._opened_at is not None


class RateLimiter:
    """Spaces request starts at least 1/rate seconds apart in this process."""

    def __init__(self, rate_per_s: float | None) -> None:
        self.interval = 0.0 if not rate_per_s else 1.0 / rate_per_s
        self._lock = threading.Lock()
        self._next = 0.0

    def reserve(self) -> float:
        """Seconds to wait before the reserved start."""
        if not self.interval:
            return 0.0
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
            return slot - now


_STATE_LOCK = threading.Lock()
_BREAKERS: dict[tuple[str, str], CircuitBreaker] = {}
_LIMITERS: dict[tuple[str, str], RateLimiter] = {}
#: Endpoints that refused `response_format` once: asked without it from then on.
_NO_RESPONSE_FORMAT: set[tuple[str, str]] = set()


def breaker_for(name: str, endpoint: JudgeEndpoint, settings: JudgeSettings) -> CircuitBreaker:
    key = (name, endpoint.url)
    with _STATE_LOCK:
        if key not in _BREAKERS:
            _BREAKERS[key] = CircuitBreaker(settings.breaker_failures, settings.breaker_reset_s)
        return _BREAKERS[key]


def limiter_for(name: str, endpoint: JudgeEndpoint) -> RateLimiter:
    key = (name, endpoint.url)
    with _STATE_LOCK:
        if key not in _LIMITERS:
            _LIMITERS[key] = RateLimiter(endpoint.rate_limit_per_s)
        return _LIMITERS[key]


def reset_state() -> None:
    """Forget every breaker, limiter and refusal (for tests and new settings)."""
    with _STATE_LOCK:
        _BREAKERS.clear()
        _LIMITERS.clear()
        _NO_RESPONSE_FORMAT.clear()


def retry_after_s(response: httpx.Response) -> float | None:
    """The response's Retry-After in seconds (delta or HTTP date), if it has one."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class EndpointCaller:
    """Calls of one endpoint within one event loop (one batch)."""

    def __init__(
        self,
        name: str,
        endpoint: JudgeEndpoint,
        settings: JudgeSettings,
        client: httpx.AsyncClient,
        wait_until: float | None = None,
    ) -> None:
        self.name = name
        #: time.monotonic() until which a call keeps trying an endpoint that is down (the
        #: items' deadline, less a margin); None: one round of retries, then an error.
        self.wait_until = wait_until
        self.endpoint = endpoint
        self.settings = settings
        self.client = client
        self.breaker = breaker_for(name, endpoint, settings)
        self.limiter = limiter_for(name, endpoint)
        self.slots = asyncio.Semaphore(endpoint.max_in_flight)
        self.url = endpoint.url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        if endpoint.api_key is not None:
            headers["Authorization"] = f"Bearer {endpoint.api_key.get_secret_value()}"
        self.headers = headers

    def _unavailable(self) -> EndpointError:
        return EndpointError(
            "endpoint_unavailable",
            f"judge endpoint {self.name!r} is unavailable: its circuit is open after "
            f"{self.settings.breaker_failures} failed tries in a row (last: "
            f"{self.breaker.last_error}); tried again after {self.settings.breaker_reset_s:g} s",
        )

    async def complete(self, body: dict[str, Any]) -> Completion:
        """One chat completion; EndpointError when there is no usable answer.

        With `wait_until`, an endpoint that is down (retries spent, or its circuit open) is
        tried again with backoff until then; the error that ends it says so."""
        started = time.monotonic()
        rounds = 0
        while True:
            try:
                if not self.breaker.allow():
                    raise self._unavailable()
                async with self.slots:
                    return await self._with_retries(body)
            except EndpointError as exc:
                if exc.reason not in WAITABLE or self.wait_until is None:
                    raise
                left = self.wait_until - time.monotonic()
                if left <= 0:
                    raise EndpointError(
                        "endpoint_down_until_deadline",
                        f"{exc}; kept trying for {time.monotonic() - started:.1f} s "
                        f"({rounds + 1} rounds) until the item's deadline",
                    ) from None
                rounds += 1
                step = self.settings.backoff_s * 2 ** min(rounds, 16)
                await asyncio.sleep(max(0.01, min(step, self.settings.backoff_max_s, left)))

    async def _with_retries(self, body: dict[str, Any]) -> Completion:
        key = (self.name, self.endpoint.url)
        attempt = 0
        while True:
            attempt += 1
            if key in _NO_RESPONSE_FORMAT:
                body = {k: v for k, v in body.items() if k != "response_format"}
            wait = self.limiter.reserve()
            if wait:
                await asyncio.sleep(wait)
            delay: float | None = None
            try:
                response = await self.client.post(
                    self.url, json=body, headers=self.headers, timeout=self.endpoint.timeout_s
                )
            except httpx.TimeoutException:
                problem = f"no answer within {self.endpoint.timeout_s:g} s"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}".rstrip(": ")
            else:
                if response.status_code == 200:
                    self.breaker.succeeded()  # the server answered, even if badly: it is up
                    return self._completion(response, attempt)
                if response.status_code == 400 and "response_format" in body:
                    # Many servers know no json_schema; the prompt still asks for JSON.
                    _NO_RESPONSE_FORMAT.add(key)
                    continue
                problem = f"HTTP {response.status_code}: {response.text[:200]}"
                if response.status_code not in RETRY_STATUSES:
                    self.breaker.succeeded()
                    raise EndpointError(
                        "endpoint_refused", f"judge endpoint {self.name!r} refused: {problem}"
                    )
                delay = retry_after_s(response)
            # Every failed try counts: the calls of a batch that all meet a dead server open
            # the circuit together, and their retries then stop at once.
            self.breaker.failed(problem)
            if attempt > self.settings.max_retries:
                raise EndpointError(
                    "endpoint_failed",
                    f"judge endpoint {self.name!r} failed {attempt} times; last: {problem}",
                )
            if delay is None:
                backoff = self.settings.backoff_s * 2 ** (attempt - 1)
                delay = backoff * (0.5 + random.random() / 2)  # jitter: retries do not bunch
            elif delay > self.settings.backoff_max_s:
                raise EndpointError(
                    "endpoint_failed",
                    f"judge endpoint {self.name!r} asked to wait {delay:g} s (Retry-After), "
                    f"over the {self.settings.backoff_max_s:g} s allowed; last: {problem}",
                )
            await asyncio.sleep(min(delay, self.settings.backoff_max_s))
            if not self.breaker.allow():
                raise self._unavailable()

    def _completion(self, response: httpx.Response, attempt: int) -> Completion:
        try:
            data = response.json()
            message = data["choices"][0]["message"]
            text = message.get("content") or ""
            usage = data.get("usage") or {}
            logprobs = (data["choices"][0].get("logprobs") or {}).get("content")
            if not isinstance(text, str):
                raise TypeError(f"content is {type(text).__name__}")
            model = data.get("model")
            return Completion(
                text=text,
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
                attempts=attempt,
                logprobs=logprobs if isinstance(logprobs, list) else None,
                model=model if isinstance(model, str) and model.strip() else self.endpoint.model,
            )
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise EndpointError(
                "bad_response",
                f"judge endpoint {self.name!r} answered 200 with no chat completion in it "
                f"({type(exc).__name__}: {exc}): {response.text[:200]!r}",
            ) from None
