"""The review queue in this process, on a fresh real database (PostgreSQL, and SQLite in WAL
mode as the embedded default runs it): jobs are submitted through the jobs service, so their
items reach people through the real ladder. And a new reviewer of the live service, for the
page tests (review_page_support.py holds the rest they share)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from review_factories import ReviewDb
from review_page_support import new_reviewer
from support import Service

from verifier_service.core.db import reset_engine_cache
from verifier_service.core.migrate import upgrade
from verifier_service.settings import get_settings
from verifier_service.wiring import configure_tiers


def _use(monkeypatch: pytest.MonkeyPatch, url: str, redis_url: str) -> None:
    monkeypatch.setenv("VERIFIER_DATABASE__URL", url)
    monkeypatch.setenv("VERIFIER_BROKER__URL", redis_url)
    # The lease tests take many tasks at once per reviewer (threads as tabs); the limit's own
    # test sets it low.
    monkeypatch.setenv("VERIFIER_REVIEW__MAX_LIVE_LEASES", "1000")
    get_settings.cache_clear()
    reset_engine_cache()
    upgrade(url)
    configure_tiers(get_settings())


@pytest.fixture(params=["postgresql", "sqlite"])
def review_db(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    redis_url: str,
) -> Iterator[ReviewDb]:
    if request.param == "postgresql":
        url = request.getfixturevalue("own_pg_url")
    else:
        url = f"sqlite:///{tmp_path / 'review.db'}"
    _use(monkeypatch, url, redis_url)
    yield ReviewDb(url)
    reset_engine_cache()
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.fixture
def reviewer(live_service: Service) -> str:
    """A new reviewer of the live service (the page tests sign in as one)."""
    return new_reviewer(live_service)
