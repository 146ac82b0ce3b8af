"""The service the metrics tests share: the API and two Celery workers on one host."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime

import pytest
import redis
from support import REDIS_HOST, REDIS_PORT, Service, start_service

from verifier_service.ladder.recovery import BROKER_MARKER

PrivateRedis = Callable[[], AbstractContextManager[str]]


@pytest.fixture(scope="package")
def private_redis() -> PrivateRedis:
    """Makes private Redis databases (see `_private_redis`)."""
    return _private_redis


@contextmanager
def _private_redis() -> Iterator[str]:
    """A Redis database index of the local server for one service of these tests alone: no
    worker of another test takes its tasks (the counts and traces are exact)."""
    for db in range(1, 16):
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
        if client.set("verifier-test-claim", "metrics", nx=True, ex=3600):
            break
    else:
        raise RuntimeError("no free Redis database index for tests")
    client.flushdb()
    client.set("verifier-test-claim", "metrics", ex=3600)
    # The PostgreSQL database is the session's, older than this Redis database: to the recovery
    # sweep a broker without its marker is one that lost its data, and the first sweep would
    # send every job in flight again (doubling the counts). Mark it as a broker that has held
    # our data all along, which is what it is.
    client.set(BROKER_MARKER, datetime.now(UTC).isoformat())
    try:
        yield f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"
    finally:
        client.flushdb()  # the claim with it


@pytest.fixture(scope="package")
def two_workers(
    tmp_path_factory: pytest.TempPathFactory, pg_url: str, private_redis: PrivateRedis
) -> Iterator[Service]:
    """The API and two Celery workers (two pool processes each) on one host's metrics dir."""
    with private_redis() as redis_url:
        service = start_service(
            tmp_path_factory.mktemp("metrics"),
            "ladder,tier.fast",
            VERIFIER_DATABASE__URL=pg_url,
            VERIFIER_BROKER__URL=redis_url,
            VERIFIER_API__INLINE_MAX_ITEMS="0",  # every job goes through the workers
        )
        try:
            service.start_worker("worker2", "ladder,tier.fast")
            yield service
        finally:
            service.stop_all()
