"""Schema migrations (Alembic, in the repository's migrations/ folder)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from verifier_service.core.errors import DatabaseNotMigratedError

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at `url` up to `revision`."""
    command.upgrade(alembic_config(url), revision)


@cache
def head_revision() -> str | None:
    """The code's head revision. Read once a process: finding it parses every migration
    script (18 ms, which every /readyz paid), and the scripts do not change under a running
    process."""
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def ensure_migrated(engine: Engine) -> None:
    """Raise a clear error unless the database is at the code's head revision."""
    current, head = current_revision(engine), head_revision()
    if current != head:
        where = engine.url.render_as_string(hide_password=True)
        state = "has no schema" if current is None else f"is at revision {current}"
        raise DatabaseNotMigratedError(
            f"database {where} {state}, but this code needs revision {head}. "
            "Run `verifier-service migrate` first."
        )
