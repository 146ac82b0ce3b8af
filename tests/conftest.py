"""Shared fixtures: real PostgreSQL, real Redis, real API and Celery worker processes."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import redis
from support import (
    REDIS_HOST,
    REDIS_PORT,
    PostgresCluster,
    Service,
    fresh_database,
    start_service,
)

from verifier_service.core.db import reset_engine_cache
from verifier_service.core.migrate import upgrade
from verifier_service.settings import get_settings
from verifier_service.wiring import configure_tiers

#: What a test module contains when its tests start processes of their own (the API, Celery
#: workers, `dev`), containers or a browser: such tests are marked `live`.
LIVE_SIGNS = ("start_service(", "live_service", "browser", "docker", "subprocess", "Popen",
              "PostgresCluster", "pg_cluster", "multiprocessing")  # fmt: skip


@cache
def _starts_processes(path: Path) -> bool:
    text = path.read_text()
    return any(sign in text for sign in LIVE_SIGNS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `live` every test that starts processes (or uses a fixture that does): `pytest -m
    "not live"` runs the in-process rest in a few minutes, against PostgreSQL and Redis."""
    live = pytest.mark.live
    for item in items:
        module = Path(str(item.fspath))
        fixtures = set(getattr(item, "fixturenames", ()))
        if _starts_processes(module) or {"live_service", "browser", "pg_cluster"} & fixtures:
            item.add_marker(live)
            continue
        # A fixture from a package's conftest that starts something (a service, the sandbox).
        conftests = [p / "conftest.py" for p in module.parents if p.is_relative_to(ROOT)]
        if any(c.is_file() and c != HERE and _starts_processes(c) for c in conftests):
            item.add_marker(live)


HERE = Path(__file__).resolve()
ROOT = HERE.parent


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    with fresh_database() as url:
        yield url


@pytest.fixture
def own_pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for one test: no rewards cached by other tests."""
    with fresh_database() as url:
        yield url


@pytest.fixture
def database_env() -> dict[str, str]:
    """Settings (VERIFIER_...) beyond the URLs that `in_process_database` sets: a module that
    needs some (an oracle's definition) overrides this fixture."""
    return {}


@pytest.fixture(params=["postgresql", "sqlite"])
def in_process_database(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    redis_url: str,
    database_env: dict[str, str],
) -> Iterator[str]:
    """This process's settings pointed at a fresh, migrated database (PostgreSQL, then the
    embedded default's SQLite) and the session's Redis, with the tiers configured: the domain
    services then run here, in the test, on real storage. Yields the database URL."""
    if request.param == "postgresql":
        url = request.getfixturevalue("own_pg_url")
    else:
        url = f"sqlite:///{tmp_path / 'in-process.db'}"
    for name, value in {
        "VERIFIER_DATABASE__URL": url, "VERIFIER_BROKER__URL": redis_url, **database_env,
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    reset_engine_cache()
    upgrade(url)
    configure_tiers(get_settings())
    yield url
    reset_engine_cache()
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis database index of the local server reserved for this session, flushed."""
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT)
    client.ping()
    for db in range(15, 0, -1):
        # Claim a database nobody else uses: the claim key expires if the session dies.
        if redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db).set(
            "verifier-test-claim", "1", nx=True, ex=3600
        ):
            break
    else:
        raise RuntimeError("no free Redis database index for tests")
    db_client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
    db_client.flushdb()
    db_client.set("verifier-test-claim", "1", ex=3600)
    yield f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"
    db_client.flushdb()


@pytest.fixture
def pg_cluster() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster()
    try:
        cluster.create()
        yield cluster
    finally:
        cluster.drop()


@pytest.fixture(scope="session")
def live_service(
    tmp_path_factory: pytest.TempPathFactory, pg_url: str, redis_url: str
) -> Iterator[Service]:
    """The API (uvicorn) and a Celery worker for the fast queues, on PostgreSQL and Redis."""
    service = start_service(
        tmp_path_factory.mktemp("live"),
        "ladder,tier.fast,callbacks,review",
        VERIFIER_DATABASE__URL=pg_url,
        VERIFIER_BROKER__URL=redis_url,
        VERIFIER_WORKER__TASK_TIME_LIMIT_S="60",
        VERIFIER_WORKER__VISIBILITY_TIMEOUT_S="65",
        VERIFIER_API__MAX_BODY_BYTES="1000000",
        VERIFIER_API__MAX_ITEMS="2000",
    )
    yield service
    service.stop_all()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium driven by Playwright, for the web pages' tests. Per module: Playwright's
    sync API keeps an event loop running in this thread while it is open, and the asyncio tests
    of other modules need the thread without one."""
    if shutil.which(CHROMIUM) is None:
        pytest.fail("the web page tests need Debian's chromium: `bash .ci/test` installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
