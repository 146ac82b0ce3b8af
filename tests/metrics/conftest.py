"""The service the metrics tests share: the API and two Celery workers on one host."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support import Service, start_service


@pytest.fixture(scope="package")
def two_workers(
    tmp_path_factory: pytest.TempPathFactory, pg_url: str, redis_url: str
) -> Iterator[Service]:
    """The API and two Celery workers (two pool processes each) on one host's metrics dir."""
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
