"""A worker that loses Redis at the wrong moment must reconnect, not die (kombu's Redis transport).

When the broker goes away (a Redis restart), Celery closes the worker's broker connection and
reconnects. Sometimes a channel of the old connection is still asked for a Redis client after
its connection has been torn down. In kombu 5.7.0, seen in bench_faults.py's Redis restart in
about one short run in four, two ways:
- closing the channel puts the messages the worker took and has not acknowledged back on their
  queues, after the channel's pools were dropped and the transport lost its connection details;
- a task that was running across the reconnect finishes and acknowledges its message on the old
  channel, whose transport is gone.
Either way kombu, building a new pool from the missing details, raises AttributeError
("'NoneType' object has no attribute 'hostname'" or "... 'client'"). Celery takes that for an
unrecoverable error and the worker exits; every item of its queues then waits until someone
starts a worker again.

`install()` makes such a channel raise redis's ConnectionError instead, which kombu and Celery
handle as the lost connection it is: the close goes on (its restore skipped), the late
acknowledgement is logged as not delivered, and the consumer reconnects. Nothing is lost:
- after a Redis restart without persistence, the messages were gone with the old Redis; the
  recovery sweep sends the work of every item sent before the restart again
  (verifier_service.ladder.recovery);
- otherwise they are still in Redis's unacknowledged set: the sweep puts back messages that
  workers took and never recorded, kombu does after the visibility timeout, and a redelivered
  task whose verdicts are stored only moves on.
"""

from __future__ import annotations

from typing import Any

import structlog
from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

log = structlog.get_logger(__name__)

_installed: list[Any] = []


def install() -> None:
    """Patch kombu's Redis channel (once per process)."""
    if _installed:
        return
    original = kombu_redis.Channel._connparams

    def _connparams(self: Any, asynchronous: bool = False) -> Any:
        transport = self.connection
        if transport is None or transport.client is None:
            log.warning(
                "a channel of a closed broker connection was asked for Redis (a broker restart "
                "or a network break): its messages are left to the recovery sweep"
            )
            raise RedisConnectionError("this channel's broker connection is closed")
        return original(self, asynchronous=asynchronous)

    kombu_redis.Channel._connparams = _connparams  # type: ignore[method-assign]
    _installed.append(original)
