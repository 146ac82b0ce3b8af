"""A worker that loses Redis at the wrong moment must reconnect, not die (kombu's Redis transport).

When the broker goes away (a Redis restart) while a worker holds messages it has not yet
acknowledged, Celery closes the broker connection and reconnects. Closing it closes its
channel, which first puts the unacknowledged messages back on their queues. Sometimes the
connection is already half torn down by then. In kombu 5.7.0, seen in bench_faults.py's Redis
restart about one run in ten, the channel then has neither a connection pool nor connection
details to make one: putting the messages back raises AttributeError ("'NoneType' object has no
attribute 'hostname'"). Celery takes that for an unrecoverable error and the worker exits.
Every item of its queues then waits until someone starts a worker again.

`install()` makes that step give up instead, with a warning, when the connection details are
gone. The close goes on and the consumer reconnects as it does after any other broker loss.
Nothing is lost by skipping it:
- after a Redis restart without persistence, the messages were gone with the old Redis;
  the recovery sweep sends the work of every item sent before the restart again
  (verifier_service.ladder.recovery);
- otherwise they are still in Redis's unacknowledged set, and the sweep puts back messages
  that workers took and never recorded, as does kombu itself after the visibility timeout.
"""

from __future__ import annotations

from typing import Any

import structlog
from kombu.transport import redis as kombu_redis

log = structlog.get_logger(__name__)

_installed: list[Any] = []


def install() -> None:
    """Patch kombu's Redis QoS (once per process)."""
    if _installed:
        return
    original = kombu_redis.QoS.restore_unacked

    def restore_unacked(self: Any, client: Any = None) -> Any:
        channel = self.channel
        transport = getattr(channel, "connection", None)
        if client is None and channel._pool is None and getattr(transport, "client", None) is None:
            log.warning(
                "could not put unacknowledged messages back: the broker connection is gone; "
                "the recovery sweep sends their work again",
                messages=len(self._delivered),
            )
            return None
        return original(self, client)

    kombu_redis.QoS.restore_unacked = restore_unacked  # type: ignore[method-assign]
    _installed.append(original)
