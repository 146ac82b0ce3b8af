"""Operators' HTTP API for escalation policies."""

from __future__ import annotations

from fastapi import APIRouter

from verifier_service.auth import service as audit
from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.core.deps import SessionDep
from verifier_service.policies import service
from verifier_service.policies.api_schemas import (
    PolicyIn,
    PolicySummary,
    PolicyVersionOut,
    ValidationOut,
)
from verifier_service.policies.params import PolicyName, VersionNumber

router = APIRouter(prefix="/v1/policies", tags=["policies"])


@router.get("")
def list_policies(session: SessionDep, _: OperatorPrincipal) -> list[PolicySummary]:
    """Every policy with its versions and which one is active."""
    return service.summaries(session)


@router.post("", status_code=201)
def create_policy_version(
    body: PolicyIn, session: SessionDep, principal: OperatorPrincipal
) -> PolicyVersionOut:
    """Validate and store a new immutable version of a policy (activated unless asked not to)."""
    saved = service.save(
        session, body.source(), fmt=body.format, activate=body.activate, created_by=principal.name
    )
    audit.record_event(
        session, principal.name, "policy.create", f"{saved.name}@{saved.version}",
        activated=body.activate,
    )  # fmt: skip
    record = service.stored_version(session, saved.name, saved.version)
    return PolicyVersionOut.from_record(record, active=body.activate)


@router.post("/validate")
def validate_policy(body: PolicyIn, _: OperatorPrincipal) -> ValidationOut:
    """Check a policy document without saving it; 422 lists what is wrong."""
    document = service.validate_document(body.source(), body.format)
    return ValidationOut(valid=True, name=document.name, document=document.model_dump(mode="json"))


@router.get("/{name}")
def get_policy(name: PolicyName, session: SessionDep, _: OperatorPrincipal) -> PolicySummary:
    """A policy's versions and which one is active."""
    return service.summary(session, name)


@router.get("/{name}/versions/{version}")
def get_policy_version(
    name: PolicyName, version: VersionNumber, session: SessionDep, _: OperatorPrincipal
) -> PolicyVersionOut:
    """One stored version of a policy document."""
    record = service.stored_version(session, name, version)
    return PolicyVersionOut.from_record(record, active=service.is_active(session, name, version))


@router.post("/{name}/versions/{version}/activate")
def activate_policy_version(
    name: PolicyName, version: VersionNumber, session: SessionDep, principal: OperatorPrincipal
) -> PolicySummary:
    """Make a stored version the one new jobs run under."""
    summary = service.activate(session, name, version)
    audit.record_event(session, principal.name, "policy.activate", f"{name}@{version}")
    return summary
