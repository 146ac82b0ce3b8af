"""What the blocking clients (VerifierClient, OraclePartner) share: one httpx.Client, closed
with the client or its `with` block, and one request loop that retries as ClientCore decides."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, Self

import httpx

from verifier_service.client._base import Attempts, Call, ClientCore, PollPolicy, RetryPolicy


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

    def _request(self, method: str, path: str, *, json: Any = None) -> httpx.Response:
        """One request, retried as `_send` retries it (OraclePartner's POSTs)."""
        return self._send(self.call(method, path, json=json))

    def _send(self, call: Call) -> httpx.Response:
        """One request, retried after connection errors, 5xx and 429 until the retry policy
        gives up; the last answer (raised for by the caller) or the last connection error."""
        attempts = Attempts(self, call)
        while True:
            outcome: httpx.Response | httpx.TransportError
            try:
                outcome = self._http.request(
                    call.method, call.path, json=call.json, headers=call.headers,
                    timeout=call.timeout,
                )  # fmt: skip
            except httpx.TransportError as exc:
                outcome = exc
            after = attempts.after(outcome)
            if isinstance(after, httpx.Response):
                return after
            time.sleep(after)
