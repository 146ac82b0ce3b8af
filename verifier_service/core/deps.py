"""FastAPI dependencies shared by every domain, declared once as Annotated aliases. Who may
call a route is declared with the aliases of `verifier_service.auth.deps`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
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


#: scope="function": the transaction commits when the endpoint returns, before the response is
#: sent, so a client that got 201 finds what it created (and a failed commit is an error
#: response, not a 201 for nothing).
SessionDep = Annotated[Session, Depends(_session, scope="function")]


# The dependencies below do no I/O, so they are async: FastAPI runs a sync dependency in a
# worker thread, a round trip through the thread pool on every request.
async def _settings() -> Settings:
    return get_settings()


SettingsDep = Annotated[Settings, Depends(_settings)]

#: Header values we store: no control characters.
PRINTABLE = r"^[^\x00-\x1f\x7f]*$"


async def _waiter(request: Request) -> JobWaiter:
    waiter: JobWaiter = request.app.state.waiter
    return waiter


WaiterDep = Annotated[JobWaiter, Depends(_waiter)]
