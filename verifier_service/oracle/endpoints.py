"""HTTP API of oracles: a partner (role oracle) claims its oracle's batches, keeps their lease
and posts results; operators see oracles and batches with every push attempt."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from tiers.oracle import NAME_PATTERN
from verifier_service.auth.deps import OperatorPrincipal, OraclePrincipal
from verifier_service.core.db import retried_transaction
from verifier_service.core.deps import SessionDep
from verifier_service.oracle import service, views
from verifier_service.oracle.schemas import (
    BatchStatusOut,
    ClaimOut,
    HeartbeatIn,
    HeartbeatOut,
    OracleOut,
    ResentOut,
    ResultsIn,
    ResultsOut,
)
from verifier_service.settings import get_settings

router = APIRouter(prefix="/v1/oracles", tags=["oracles"])

OracleName = Annotated[str, Path(pattern=NAME_PATTERN)]
BatchId = Annotated[str, Path(min_length=1, max_length=32)]


def _base(request: Request) -> str:
    return get_settings().oracles.public_url or str(request.base_url)


@router.post(
    "/{oracle}/claim",
    response_model=ClaimOut,
    responses={204: {"description": "No batch waits for this oracle."}},
)
def claim(oracle: OracleName, request: Request, principal: OraclePrincipal) -> ClaimOut | Response:
    """Lease the oldest batch of your (pull) oracle that nobody holds; 204 when none waits."""
    service.serving(oracle, principal)
    service.select(oracle)  # items gathered long enough are batched first
    out = retried_transaction(lambda s: service.claim(s, oracle, principal, _base(request)))
    return Response(status_code=204) if out is None else out


@router.post("/{oracle}/batches/{batch_id}/heartbeat")
def heartbeat(
    oracle: OracleName, batch_id: BatchId, body: HeartbeatIn, principal: OraclePrincipal
) -> HeartbeatOut:
    """Keep your lease of a batch; its new expiry (409 lease_lost once another client has it)."""
    expires = retried_transaction(
        lambda s: service.heartbeat(s, oracle, principal, batch_id, body.lease_id)
    )
    return HeartbeatOut(lease_expires_at=expires)


@router.post("/{oracle}/results")
def post_results(oracle: OracleName, body: ResultsIn, principal: OraclePrincipal) -> ResultsOut:
    """Post results of your oracle's items (idempotent per result; taken whole or refused)."""
    return retried_transaction(lambda s: service.record_results(s, oracle, principal, body))


@router.get("")
def list_oracles(session: SessionDep, _: OperatorPrincipal) -> list[OracleOut]:
    """Every oracle defined: its capacity, used this period, and its items by state."""
    return views.overview(session)


@router.get("/{oracle}/batches/{batch_id}")
def get_batch(
    oracle: OracleName, batch_id: BatchId, session: SessionDep, _: OperatorPrincipal
) -> BatchStatusOut:
    """One batch: its state, its items' states and every push attempt."""
    return views.batch_status(session, oracle, batch_id)


@router.post("/{oracle}/pause", status_code=204)
def pause(oracle: OracleName, principal: OperatorPrincipal) -> None:
    """Pause an oracle: nothing more is selected or claimed until it is resumed."""
    retried_transaction(lambda s: service.set_paused(s, oracle, True, principal.name))


@router.post("/{oracle}/resume", status_code=204)
def resume(oracle: OracleName, principal: OperatorPrincipal) -> None:
    """Resume a paused oracle: the items that waited are selected now."""
    retried_transaction(lambda s: service.set_paused(s, oracle, False, principal.name))


@router.post("/{oracle}/batches/{batch_id}/resend")
def resend(oracle: OracleName, batch_id: BatchId, principal: OperatorPrincipal) -> ResentOut:
    """Send a batch again: pushed anew (the partner lost it), or given back to be claimed."""
    state = retried_transaction(lambda s: service.resend(s, oracle, batch_id, principal.name))
    return ResentOut(state=state)
