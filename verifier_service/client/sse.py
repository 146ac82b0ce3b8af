"""Server-sent events for the clients: the parser, and the bookkeeping of a resumable stream."""

from __future__ import annotations

import time

import httpx

from verifier_service.wire.events import JobEventOut
from verifier_service.wire.rewards import Reward

#: Longest wait for a byte of the stream (the service sends a keep-alive every ~15 s).
READ_TIMEOUT_S = 60.0


class SseParser:
    """Feed it the stream's lines; it hands back each complete event (comments skipped)."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._kind = ""

    def feed(self, line: str) -> JobEventOut | None:
        if line == "":
            data, self._data, self._kind = "\n".join(self._data), [], ""
            return JobEventOut.model_validate_json(data) if data else None
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._kind = value
        return None


class StreamState:
    """Where a resumable stream of a job is: the last event seen and how long to keep trying."""

    def __init__(self, job_id: str, last_event_id: int | None, timeout_s: float | None) -> None:
        self.path = f"/v1/jobs/{job_id}/events"
        self.last = last_event_id
        self.deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self.attempt = 0
        self.started = time.monotonic()

    def headers(self, base: dict[str, str]) -> dict[str, str]:
        out = {**base, "Accept": "text/event-stream"}
        if self.last is not None:
            out["Last-Event-ID"] = str(self.last)
        return out

    def timeout(self, connect_s: float) -> httpx.Timeout:
        read = READ_TIMEOUT_S
        if self.deadline is not None:
            read = max(0.05, min(read, self.deadline - time.monotonic()))
        return httpx.Timeout(connect_s, read=read)

    def seen(self, event: JobEventOut) -> None:
        """An event arrived: resume after it; the connection is healthy again."""
        self.last = event.id
        self.attempt, self.started = 0, time.monotonic()

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline


def reward_of(event: JobEventOut) -> tuple[int, Reward] | None:
    """`(index, reward)` of an item event; None for other events."""
    if event.type not in ("item.finished", "item.revised"):
        return None
    return int(event.data["index"]), Reward.model_validate(event.data["reward"])
