"""The data commands' first step: find the service's database, never make an empty one.

`users`, `keys` and `policies` read and write what a running service keeps. Run from another
folder than `dev`'s, they used to create an empty SQLite file there and fail on its missing
tables with a stack trace; they now say where they looked and how to point them at the data.
"""

from __future__ import annotations

import typer
from rich.console import Console

from verifier_service.settings import get_settings

console = Console(stderr=True, soft_wrap=True)


def require_database() -> None:
    """Exit with status 2 and a short word unless the database exists and is migrated."""
    from sqlalchemy.exc import OperationalError

    from verifier_service.core.db import get_engine
    from verifier_service.core.errors import DatabaseNotMigratedError
    from verifier_service.core.logging import mask_secrets
    from verifier_service.core.migrate import ensure_migrated

    settings = get_settings()
    if not settings.database.url:
        path = (settings.data_dir / "verifier.db").resolve()
        if not path.is_file():
            console.print(
                f"[red]error:[/] no database at {path}. `verifier-service dev` keeps its data "
                "in ./data under the folder it was started from: run this command there, or "
                "point VERIFIER_DATA_DIR (or VERIFIER_DATABASE__URL) at the service's data. "
                "`verifier-service migrate` makes a new database here if that is what you want."
            )
            raise typer.Exit(2)
    try:
        ensure_migrated(get_engine())
    except DatabaseNotMigratedError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None
    except OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        where = mask_secrets(settings.database_url)
        console.print(f"[red]error:[/] cannot open the database {where}: {reason}")
        raise typer.Exit(2) from None
