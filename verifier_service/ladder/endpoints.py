"""Operators' HTTP API over what the ladder did under a policy: cost reports and replays."""

from __future__ import annotations

from fastapi import APIRouter

from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.core.deps import SessionDep
from verifier_service.ladder import repository
from verifier_service.ladder.costs import CostReport, policy_version_cost
from verifier_service.ladder.replay import ReplayReport, replay
from verifier_service.policies import service as policies
from verifier_service.policies.api_schemas import ReplayIn
from verifier_service.policies.params import PolicyName, VersionNumber

router = APIRouter(prefix="/v1/policies", tags=["policies"])


@router.get("/{name}/versions/{version}/cost")
def get_policy_version_cost(
    name: PolicyName, version: VersionNumber, session: SessionDep, _: OperatorPrincipal
) -> CostReport:
    """Cost per tier, cache hits, escalations and savings of every job run under a version."""
    policies.stored_version(session, name, version)
    return policy_version_cost(session, name, version)


@router.post("/{name}/replay")
def replay_policy(
    name: PolicyName, body: ReplayIn, session: SessionDep, _: OperatorPrincipal
) -> ReplayReport:
    """Run a draft over stored items of past jobs and compare it with the active version."""
    draft = policies.validate_document(body.source(), body.format)
    active = policies.active_or_none(session, name)
    items = repository.stored_leaf_items(session, body.job_ids, name, body.limit)
    return replay(
        session,
        draft,
        active.document if active else None,
        active.version if active else None,
        items,
        compute_missing=body.compute_missing,
    )
