"""A job's ladder pass: its items climb under the policy version the job was submitted with,
never the policy's active version (a policy changed while a job runs does not change it)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from verifier_service.ladder.models import Job
from verifier_service.ladder.service import LadderPass
from verifier_service.policies.schemas import PolicyDocument
from verifier_service.policies.service import ResolvedPolicy, resolve


def job_policy(session: Session, job: Job) -> ResolvedPolicy:
    """The policy version `job` was submitted with, parsed (cached per version)."""
    return resolve(session, job.policy_name, job.policy_version)


def job_ladders(session: Session, job: Job) -> PolicyDocument:
    """The document of `job`'s policy version: its ladders, rewards and budgets."""
    return job_policy(session, job).document


def ladder_pass(session: Session, job: Job) -> LadderPass:
    """A pass of the state machine over `job`'s items, in the caller's transaction, under the
    policy version the job was submitted with."""
    return LadderPass(session, job, job_policy(session, job))
