"""What the blocking clients (VerifierClient, OraclePartner) share: one httpx.Client, closed
with the client or its `with` block, and one request loop that retries as ClientCore decides."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, Self

import httpx

from verifier_service.client._base import ClientCore, PollPolicy, RetryPolicy


class BlockingClient(ClientCore):
    """A ClientCore with a blocking connection pool to `base_url`."""

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
        transport: httpx.BaseTransport | None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            base_url, principal=principal, api_key=api_key, timeout_s=timeout_s, retry=retry,
            poll=poll, batch_size=batch_size,
        )  # fmt: skip
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout_s, transport=transport,
            headers={**(headers or {}), **self.default_headers()},
        )  # fmt: skip

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        headers: dict[str, str] | None = None,
        read_timeout_s: float | None = None,
    ) -> httpx.Response:
        """One request, retried after connection errors, 5xx and 429 until the retry policy
        gives up; the last answer (raised for by the caller) or the last connection error."""
        timeout = httpx.Timeout(self.timeout_s if read_timeout_s is None else read_timeout_s)
        attempt = 0
        started = time.monotonic()
        while True:
            outcome: httpx.Response | httpx.TransportError
            try:
                outcome = self._http.request(
                    method, path, json=json, headers=headers, timeout=timeout
                )
            except httpx.TransportError as exc:
                outcome = exc
            delay = self.retry_delay(attempt, f"{method} {self.base_url}{path}", outcome, started)
            if delay is None:
                assert isinstance(outcome, httpx.Response)
                return outcome
            time.sleep(delay)
            attempt += 1
