"""FastAPI dependencies, declared once as Annotated aliases."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated

from fastapi import Depends, Header, Request
from sqlalchemy.orm import Session

from verifier_service.core.db import get_sessionmaker
from verifier_service.core.notify import JobWaiter
from verifier_service.settings import Settings, get_settings


def _session() -> Iterator[Session]:
    session = get_sessionmaker()()
    try:
        with session.begin():
            yield session
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


#: Header values we store: no control characters.
PRINTABLE = r"^[^\x00-\x1f\x7f]*$"


def _principal(
    x_principal: Annotated[str | None, Header(max_length=128, pattern=PRINTABLE)] = None,
) -> str:
    # The seam for authentication: until API keys exist, callers may name themselves.
    return x_principal or "anonymous"


CurrentPrincipal = Annotated[str, Depends(_principal)]


def require_role(role: str) -> Callable[[str], str]:
    """Dependency that will check the principal's role once auth exists; today it allows all."""

    def check(principal: CurrentPrincipal) -> str:
        # Roles arrive with the auth issue; until then every principal may act as `role`.
        return principal

    check.__name__ = f"require_{role}"

    return check


OperatorPrincipal = Annotated[str, Depends(require_role("operator"))]


def _waiter(request: Request) -> JobWaiter:
    waiter: JobWaiter = request.app.state.waiter
    return waiter


WaiterDep = Annotated[JobWaiter, Depends(_waiter)]
