"""The ladder's in-process tests: a fresh PostgreSQL database and a private Redis database
(the broker), the service's settings pointed at them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from verifier_service.core.broker import celery_app
from verifier_service.core.db import reset_engine_cache
from verifier_service.core.migrate import upgrade
from verifier_service.settings import get_settings
from verifier_service.wiring import configure_tiers


@pytest.fixture
def ladder_db(own_pg_url: str, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The settings on a fresh PostgreSQL database (migrated) and the session's Redis; its URL."""
    monkeypatch.setenv("VERIFIER_DATABASE__URL", own_pg_url)
    monkeypatch.setenv("VERIFIER_BROKER__URL", redis_url)
    get_settings.cache_clear()
    celery_app.cache_clear()
    reset_engine_cache()
    upgrade(own_pg_url)
    configure_tiers(get_settings())
    yield own_pg_url
    reset_engine_cache()
    monkeypatch.undo()
    get_settings.cache_clear()
    celery_app.cache_clear()
