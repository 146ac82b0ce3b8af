"""The Alembic migrations build exactly the schema the ORM models describe."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine

from migrations.orm_models import target_metadata
from verifier_service.core.migrate import head_revision, upgrade


def _drift(url: str) -> list[object]:
    upgrade(url)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert context.get_current_revision() == head_revision()
            return list(compare_metadata(context, target_metadata))
    finally:
        engine.dispose()


def test_sqlite_schema_matches_the_models(tmp_path: Path) -> None:
    assert _drift(f"sqlite:///{tmp_path / 'db.sqlite'}") == []


def test_postgresql_schema_matches_the_models(pg_url: str) -> None:
    assert _drift(pg_url) == []
