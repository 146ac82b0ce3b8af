"""Operators' JSON API behind the console's policy pages (everything the pages show)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.console import policy_service as service
from verifier_service.console.policy_schemas import (
    DraftCheck,
    DraftIn,
    PolicyDetail,
    PolicyDiff,
    PolicyRow,
)
from verifier_service.core.deps import SessionDep
from verifier_service.ladder.replay import ReplayReport
from verifier_service.policies.endpoints import PolicyName, VersionNumber

router = APIRouter(prefix="/v1/console/policies", tags=["console"])

#: Which version of a policy, in a query.
VersionQuery = Annotated[int, Query(ge=1, le=2**31 - 1, description="A policy version number.")]
#: How many of the policy's latest stored items a replay runs over.
ReplayLimit = Annotated[
    int, Query(ge=1, le=5000, description="Most stored items to replay (the latest ones).")
]


@router.get("")
def list_policies(session: SessionDep, _: OperatorPrincipal) -> list[PolicyRow]:
    """Every policy with its active and latest versions."""
    return service.rows(session)


@router.get("/{name}")
def get_policy(name: PolicyName, session: SessionDep, _: OperatorPrincipal) -> PolicyDetail:
    """A policy's versions, the active one and the version a roll back would return to."""
    return service.detail(session, name)


@router.get("/{name}/diff")
def diff_versions(
    name: PolicyName, a: VersionQuery, b: VersionQuery, session: SessionDep, _: OperatorPrincipal
) -> PolicyDiff:
    """Two versions side by side as YAML, line by line, with what changed."""
    return service.diff(session, name, a, b)


@router.post("/{name}/check")
def check_draft(name: PolicyName, body: DraftIn, _: OperatorPrincipal) -> DraftCheck:
    """Validate a draft without storing it: each problem with its field and line."""
    return service.check_draft(name, body.text)


@router.get("/{name}/versions/{version}/replay")
def replay_version(
    name: PolicyName,
    version: VersionNumber,
    session: SessionDep,
    _: OperatorPrincipal,
    limit: ReplayLimit = 500,
) -> ReplayReport:
    """Replay a stored version over the policy's latest stored items, against the active one
    (known verdicts only: nothing is computed)."""
    return service.replay_version(session, name, version, limit)


@router.post("/{name}/versions/{version}/activate")
def activate_version(
    name: PolicyName, version: VersionNumber, session: SessionDep, principal: OperatorPrincipal
) -> PolicyDetail:
    """Make a stored version the active one (audited)."""
    return service.activate(session, name, version, principal.name)


@router.post("/{name}/rollback")
def rollback(name: PolicyName, session: SessionDep, principal: OperatorPrincipal) -> PolicyDetail:
    """Activate the version that was active before the current one (audited)."""
    return service.rollback(session, name, principal.name)
