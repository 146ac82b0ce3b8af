"""Operators' HTTP API for escalation policies."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from verifier_service.core.deps import OperatorPrincipal, SessionDep
from verifier_service.core.errors import NotFoundError
from verifier_service.ladder.costs import CostReport, policy_version_cost
from verifier_service.policies import repository, service
from verifier_service.policies.api_schemas import (
    PolicyIn,
    PolicySummary,
    PolicyVersionOut,
    ReplayIn,
    ValidationOut,
)
from verifier_service.policies.models import PolicyVersionRecord
from verifier_service.policies.replay import ReplayReport, replay, stored_items
from verifier_service.policies.schemas import POLICY_NAME_PATTERN

#: A policy's name in a path: a slug (see PolicyDocument.name).
PolicyName = Annotated[str, Path(pattern=POLICY_NAME_PATTERN, description="A policy's name.")]
#: Versions count from 1 and are stored as 32-bit integers.
VersionNumber = Annotated[int, Path(ge=1, le=2**31 - 1, description="A policy version number.")]

router = APIRouter(prefix="/v1/policies", tags=["policies"])


def _summary(session: SessionDep, name: str) -> PolicySummary:
    policy = repository.get_policy(session, name)
    if policy is None:
        raise NotFoundError(f"no policy named {name!r}")
    versions = [v.version for v in repository.list_versions(session, name)]
    return PolicySummary(name=name, active_version=policy.active_version, versions=versions)


@router.get("")
def list_policies(session: SessionDep, _: OperatorPrincipal) -> list[PolicySummary]:
    """Every policy with its versions and which one is active."""
    return [_summary(session, p.name) for p in repository.list_policies(session)]


@router.post("", status_code=201)
def create_policy_version(
    body: PolicyIn, session: SessionDep, principal: OperatorPrincipal
) -> PolicyVersionOut:
    """Validate and store a new immutable version of a policy (activated unless asked not to)."""
    saved = service.save(
        session, body.source(), fmt=body.format, activate=body.activate, created_by=principal
    )
    record = repository.get_version(session, saved.name, saved.version)
    assert record is not None
    return PolicyVersionOut.from_record(record, active=body.activate)


@router.post("/validate")
def validate_policy(body: PolicyIn, _: OperatorPrincipal) -> ValidationOut:
    """Check a policy document without saving it; 422 lists what is wrong."""
    document = service.validate_document(body.source(), body.format)
    return ValidationOut(valid=True, name=document.name, document=document.model_dump(mode="json"))


@router.get("/{name}")
def get_policy(name: PolicyName, session: SessionDep, _: OperatorPrincipal) -> PolicySummary:
    """A policy's versions and which one is active."""
    return _summary(session, name)


def _version(session: SessionDep, name: str, version: int) -> PolicyVersionRecord:
    record = repository.get_version(session, name, version)
    if record is None:
        raise NotFoundError(f"policy {name!r} has no version {version}")
    return record


@router.get("/{name}/versions/{version}")
def get_policy_version(
    name: PolicyName, version: VersionNumber, session: SessionDep, _: OperatorPrincipal
) -> PolicyVersionOut:
    """One stored version of a policy document."""
    record = _version(session, name, version)
    policy = repository.get_policy(session, name)
    active = policy is not None and policy.active_version == version
    return PolicyVersionOut.from_record(record, active=active)


@router.post("/{name}/versions/{version}/activate")
def activate_policy_version(
    name: PolicyName, version: VersionNumber, session: SessionDep, _: OperatorPrincipal
) -> PolicySummary:
    """Make a stored version the one new jobs run under."""
    _version(session, name, version)
    repository.set_active(session, name, version)
    return _summary(session, name)


@router.get("/{name}/versions/{version}/cost")
def get_policy_version_cost(
    name: PolicyName, version: VersionNumber, session: SessionDep, _: OperatorPrincipal
) -> CostReport:
    """Cost per tier, cache hits, escalations and savings of every job run under a version."""
    _version(session, name, version)
    return policy_version_cost(session, name, version)


@router.post("/{name}/replay")
def replay_policy(
    name: PolicyName, body: ReplayIn, session: SessionDep, _: OperatorPrincipal
) -> ReplayReport:
    """Run a draft over stored items of past jobs and compare it with the active version."""
    draft = service.validate_document(body.source(), body.format)
    policy = repository.get_policy(session, name)
    active = None
    if policy is not None and policy.active_version is not None:
        active = service.resolve(session, name)
    items = stored_items(session, body.job_ids, name, body.limit)
    return replay(
        session,
        draft,
        active.document if active else None,
        active.version if active else None,
        items,
        compute_missing=body.compute_missing,
    )
