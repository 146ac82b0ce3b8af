"""A worker whose broker connection is torn down while it holds unacknowledged messages goes on
(workers/kombu_patches.py): kombu's Redis transport, a real Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from kombu import Connection, Exchange, Producer, Queue
from kombu.transport import redis as kombu_redis

from workers import kombu_patches


@pytest.fixture
def delivered(redis_url: str) -> Iterator[tuple[Any, Any, str]]:
    """A channel holding one message it took from a queue and has not acknowledged."""
    name = f"kombu-patch-{uuid.uuid4().hex[:8]}"
    connection = Connection(redis_url)
    channel = connection.channel()
    queue = Queue(name, Exchange(name, type="direct"), routing_key=name)
    queue(channel).declare()
    Producer(channel).publish({"n": 1}, exchange=queue.exchange, routing_key=name)
    message = channel.basic_get(name, no_ack=False)
    assert message is not None
    assert len(channel.qos._delivered) == 1
    yield connection, channel, name
    redis.Redis.from_url(redis_url).delete(name)
    connection.release()


def _torn_down(connection: Any, channel: Any) -> None:
    """What Celery's reconnect leaves, sometimes, by the time the channel closes: no pool, and
    the transport without its connection details."""
    channel._disconnect_pools()
    connection.transport.client = None


def test_unpatched_kombu_fails_there(delivered: tuple[Any, Any, str]) -> None:
    """The failure the patch is for (if this fails, kombu has fixed it: drop the patch)."""
    connection, channel, _ = delivered
    installed = kombu_patches._installed
    restore = installed[0] if installed else kombu_redis.QoS.restore_unacked
    _torn_down(connection, channel)
    with pytest.raises(AttributeError, match="hostname"):
        restore(channel.qos)


def test_a_torn_down_connection_closes_with_a_warning_not_an_error(
    delivered: tuple[Any, Any, str], capsys: pytest.CaptureFixture[str]
) -> None:
    kombu_patches.install()
    connection, channel, _ = delivered
    _torn_down(connection, channel)
    channel.close()  # raised AttributeError, which Celery took as unrecoverable: the worker left
    assert channel.closed
    assert "could not put unacknowledged messages back" in capsys.readouterr().out


def test_a_closed_channel_still_puts_its_messages_back(
    delivered: tuple[Any, Any, str], redis_url: str
) -> None:
    kombu_patches.install()
    _, channel, name = delivered
    assert redis.Redis.from_url(redis_url).llen(name) == 0  # taken, not acknowledged
    channel.close()
    assert redis.Redis.from_url(redis_url).llen(name) == 1  # back on its queue
