"""The service the metrics tests share: the API and two Celery workers on one host."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest
from support import Service, private_backends, start_service

PrivateRedis = Callable[[], AbstractContextManager[tuple[str, str]]]


@pytest.fixture(scope="package")
def private_redis() -> PrivateRedis:
    """Makes a database and a Redis database for one service alone (`support.private_backends`):
    no worker or recovery sweep of another service touches its work, so counts are exact."""
    return private_backends


@pytest.fixture(scope="package")
def two_workers(
    tmp_path_factory: pytest.TempPathFactory, private_redis: PrivateRedis
) -> Iterator[Service]:
    """The API and two Celery workers (two pool processes each) on one host's metrics dir."""
    with private_redis() as (pg_url, redis_url):
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
