"""A worker whose broker connection is torn down while it holds unacknowledged messages goes on
(workers/kombu_patches.py): kombu's Redis transport, a real Redis."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from kombu import Connection, Exchange, Producer, Queue
from kombu.transport import redis as kombu_redis

from workers import kombu_patches


@pytest.fixture
def delivered(redis_url: str) -> Iterator[tuple[Any, Any, Any, str]]:
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
    yield connection, channel, message, name
    channel.qos._delivered.clear()  # else kombu tries to put it back at exit, and says so
    redis.Redis.from_url(redis_url).delete(name)
    connection.release()


def _torn_down(connection: Any, channel: Any) -> None:
    """What Celery's reconnect leaves, sometimes, while a channel of the old connection is
    still in use: no pools, and the transport without its connection details."""
    channel._disconnect_pools()
    connection.transport.client = None


def test_unpatched_kombu_fails_there(delivered: tuple[Any, Any, Any, str]) -> None:
    """The failure the patch is for (if this fails, kombu has fixed it: drop the patch)."""
    connection, channel, _, _ = delivered
    installed = kombu_patches._installed
    connparams = installed[0] if installed else kombu_redis.Channel._connparams
    _torn_down(connection, channel)
    with pytest.raises(AttributeError, match="hostname"):
        connparams(channel)


def test_closing_such_a_channel_completes(
    delivered: tuple[Any, Any, Any, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Closing it (which first puts its unacknowledged messages back) raised AttributeError,
    which Celery took as unrecoverable: the worker exited."""
    kombu_patches.install()
    connection, channel, _, _ = delivered
    _torn_down(connection, channel)
    connection.maybe_close_channel(channel)  # as kombu's connection close does
    assert channel.closed
    assert "a channel of a closed broker connection" in capsys.readouterr().out


@pytest.mark.parametrize("gone", ["connection details", "transport"])
def test_a_late_acknowledgement_on_such_a_channel_is_logged_not_fatal(
    gone: str, delivered: tuple[Any, Any, Any, str], caplog: pytest.LogCaptureFixture
) -> None:
    """A task running across the reconnect acknowledges its message on the old channel when it
    ends: a connection error now, which Celery's acknowledgement logs and goes on from (seen
    with the transport's details gone, and with the channel's transport gone)."""
    kombu_patches.install()
    connection, channel, message, _ = delivered
    _torn_down(connection, channel)
    if gone == "transport":
        channel.connection = None
    with pytest.raises(connection.connection_errors):
        message.ack()
    caplog.set_level(logging.CRITICAL)
    message.ack_log_error(logging.getLogger("celery"), connection.connection_errors)
    assert "Couldn't ack" in caplog.text


def test_a_channel_closed_normally_still_puts_its_messages_back(
    delivered: tuple[Any, Any, Any, str], redis_url: str
) -> None:
    kombu_patches.install()
    _, channel, _, name = delivered
    assert redis.Redis.from_url(redis_url).llen(name) == 0  # taken, not acknowledged
    channel.close()
    assert redis.Redis.from_url(redis_url).llen(name) == 1  # back on its queue
