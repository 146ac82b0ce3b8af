"""The synchronous Redis client of the broker's own keys (worker presence, paused queues, rate
limits, the API key cache, wake-ups), which fails fast while the broker is away.

redis-py's default retries a call that cannot reach the server ten times, with a backoff that
grows to 1 s: about 4.5 s per call. Every caller of this client carries on without the broker
(a rate limit fails open, the key is looked up in the database, the inline lane takes its tier
for not paused), but a one-molecule request touches the broker four times, and with the broker
stopped it took 20 s instead of milliseconds. Here a call gets three quick retries (under 0.1 s
of backoff in all), and once a call could not reach the broker, the calls of the next
`pause_s` seconds fail at once with the same ConnectionError.
"""

from __future__ import annotations

import time
from typing import Any

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.client import Pipeline
from redis.retry import Retry

#: What a broker that cannot be reached raises.
UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)


class Outage:
    """When the broker was last found unreachable; shared by a client and its pipelines."""

    def __init__(self, pause_s: float) -> None:
        self.pause_s = pause_s
        self._until = 0.0

    def check(self) -> None:
        left = self._until - time.monotonic()
        if left > 0:
            raise redis.ConnectionError(
                f"the broker could not be reached a moment ago; not tried again for {left:.1f} s"
            )

    def failed(self) -> None:
        self._until = time.monotonic() + self.pause_s


class BrokerRedis(redis.Redis):
    """A redis-py client with short retries that stops calling for `pause_s` after the broker
    could not be reached."""

    def __init__(self, *, pause_s: float, **kwargs: Any) -> None:
        retry = Retry(ExponentialWithJitterBackoff(cap=0.05, base=0.01), 3)
        super().__init__(retry=retry, **kwargs)
        self.outage = Outage(pause_s)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.outage.check()
        try:
            return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except UNREACHABLE:
            self.outage.failed()
            raise

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Pipeline:
        return BrokerPipeline(
            self.outage, self.connection_pool, self.response_callbacks, transaction, shard_hint
        )


class BrokerPipeline(Pipeline):
    """A pipeline of `BrokerRedis`: its commands go in one round trip, under the same outage."""

    def __init__(self, outage: Outage, *args: Any) -> None:
        super().__init__(*args)
        self.outage = outage

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        self.outage.check()
        try:
            return super().execute(raise_on_error)
        except UNREACHABLE:
            self.outage.failed()
            raise
