"""Operators' JSON API behind the console's policy pages (everything the pages show)."""

from __future__ import annotations

from fastapi import APIRouter

from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.console.params import ReplayLimit, VersionQuery
from verifier_service.console.policies import service
from verifier_service.console.policies.schemas import (
    DraftCheck,
    DraftIn,
    PolicyDetail,
    PolicyDiff,
    PolicyRow,
)
from verifier_service.core.deps import SessionDep
from verifier_service.ladder.replay import ReplayReport
from verifier_service.policies.params import PolicyName, VersionNumber

router = APIRouter(prefix="/v1/console/policies", tags=["console"])


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
