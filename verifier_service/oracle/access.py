"""The oracle domain's ground: which oracles are defined and who serves each, their Celery
queues and tasks, capacity periods, whether one is paused, and how staged work leaves after a
commit. The rest of the domain (`selection`, `batches`, `service`) stands on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

import structlog
from sqlalchemy import event
from sqlalchemy.orm import Session

from tiers.oracle import OracleDefinition
from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.core.db import utcnow
from verifier_service.core.outbox import OutboxMessage
from verifier_service.ladder import dispatch
from verifier_service.oracle.errors import NotThisOraclesError, UnknownOracleError
from verifier_service.oracle.models import OracleControl
from verifier_service.settings import get_settings

log = structlog.get_logger(__name__)

SELECT_TASK = "oracle.select"
PUSH_TASK = "oracle.push"


def queue_for(oracle: str) -> str:
    """The Celery queue of one oracle's tasks (selection, pushes): a partner that is slow or
    down holds up its own queue, not the webhooks' or another oracle's. A worker of the
    `callbacks` queue takes every oracle's queue too unless told which (see `oracle_queues`)."""
    return f"oracle.{oracle}"


def oracle_queues(wanted: list[str], oracles: Iterable[str]) -> list[str]:
    """A worker's queues with the oracles' added: a worker that takes `callbacks` and names no
    `oracle.*` queue itself also takes each defined oracle's."""
    if "callbacks" not in wanted or any(q.startswith("oracle.") for q in wanted):
        return wanted
    return [*wanted, *(queue_for(name) for name in sorted(oracles))]


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def definitions() -> dict[str, OracleDefinition]:
    return get_settings().oracles.definitions


def definition(name: str) -> OracleDefinition:
    found = definitions().get(name)
    if found is None:
        raise UnknownOracleError(
            f"no oracle {name!r}", hint="oracles are defined in VERIFIER_ORACLES__DEFINITIONS"
        )
    return found


def serving(name: str, principal: AuthenticatedPrincipal) -> OracleDefinition:
    """The oracle `name`, if `principal` (role oracle) is the one that serves it (or the local
    admin of a deployment run without auth, which trusts every local caller)."""
    found = definition(name)
    if principal.via != "local" and principal.name != (found.principal or name):
        raise NotThisOraclesError(f"this key does not serve oracle {name!r}")
    return found


def period_start(now: datetime, period_s: float) -> datetime:
    """Start of the capacity period `now` falls in (periods count from the epoch, UTC)."""
    elapsed = (now - EPOCH).total_seconds()
    return EPOCH + timedelta(seconds=elapsed - elapsed % period_s)


def after_commit(session: Session, outgoing: Sequence[dispatch.Outgoing]) -> None:
    """Send staged work (and wake a job's waiters) once this transaction commits; the outbox
    keeps it should this process die first."""
    todo = [o for o in outgoing if o.messages or o.finished_jobs or o.event_jobs]
    if not todo:
        return

    def _after(_session: Session) -> None:
        for one in todo:
            try:
                dispatch.deliver(one)
            except Exception:  # the sweeper sends what is still in the outbox
                log.exception("could not deliver oracle work after commit")

    event.listen(session, "after_commit", _after, once=True)


def select_message(name: str, at: datetime) -> OutboxMessage:
    """The outbox message that runs `name`'s selection at `at`."""
    return OutboxMessage(
        task=SELECT_TASK, args=[name], queue=queue_for(name), eta=at, created_at=utcnow()
    )


def paused(session: Session, name: str) -> bool:
    control = session.get(OracleControl, name)
    return bool(control is not None and control.paused)
