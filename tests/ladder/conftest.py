"""The ladder's in-process tests: a fresh PostgreSQL database and a Redis database of their own
(the broker: no worker of another test's service takes what they send), the service's settings
pointed at them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support import private_backends

from verifier_service.core.broker import celery_app
from verifier_service.core.db import reset_engine_cache
from verifier_service.core.migrate import upgrade
from verifier_service.settings import get_settings
from verifier_service.wiring import configure_tiers


@pytest.fixture
def ladder_db(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The settings on a fresh PostgreSQL database (migrated) and a Redis database of its own;
    the database's URL."""
    with private_backends("ladder-tests") as (pg_url, redis_url):
        monkeypatch.setenv("VERIFIER_DATABASE__URL", pg_url)
        monkeypatch.setenv("VERIFIER_BROKER__URL", redis_url)
        get_settings.cache_clear()
        celery_app.cache_clear()
        reset_engine_cache()
        upgrade(pg_url)
        configure_tiers(get_settings())
        yield pg_url
        reset_engine_cache()
        monkeypatch.undo()
        get_settings.cache_clear()
        celery_app.cache_clear()
