"""Fixtures of the core tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from verifier_service.core.db import Base, make_engine


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An engine on a fresh database with every table, once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/rows.db"
    else:
        url = str(request.getfixturevalue("own_pg_url"))
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    yield engine
    engine.dispose()
