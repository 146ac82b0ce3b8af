"""Policy logic: validate documents against the registered tiers, store versions, resolve."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from tiers.registry import UnknownTierError, get_tier, tier_names
from verifier_service.core.errors import DomainError, NotFoundError
from verifier_service.policies import repository
from verifier_service.policies.api_schemas import PolicySummary
from verifier_service.policies.gates import document_budget
from verifier_service.policies.loader import PolicyValidationError, parse_policy
from verifier_service.policies.models import PolicyVersionRecord
from verifier_service.policies.schemas import PolicyDocument


class InvalidPolicyError(DomainError):
    """A policy document that does not validate; `errors` point at the offending fields."""

    status_code = 422
    code = "invalid_policy"


@dataclass(frozen=True)
class ResolvedPolicy:
    """A policy version and its parsed document."""

    name: str
    version: int
    document: PolicyDocument


def known_tiers() -> set[str]:
    return set(tier_names())


def validate_document(source: str | Mapping[str, Any], fmt: str | None = None) -> PolicyDocument:
    """Parse and fully check a policy: schema, CEL gates, tier names and each tier's config.
    Its CEL expressions are bounded in cost, each and together (gate_cost.py): checking one
    runs it on sample contexts, in the caller's thread, holding the GIL."""
    try:
        with document_budget():
            document = parse_policy(source, fmt=fmt, known_tiers=known_tiers())  # type: ignore[arg-type]
    except PolicyValidationError as exc:
        # What validated of it (exc.partial) has its tiers' configs checked too: one answer
        # names every problem, not only those the schema found first.
        errors = [{"loc": e["loc"], "msg": e["msg"]} for e in exc.errors]
        named = {e["loc"] for e in errors}
        if exc.partial is not None:
            errors += [e for e in _tier_errors(exc.partial) if e["loc"] not in named]
        raise InvalidPolicyError(
            "the policy document is invalid", errors=errors, hint=_HINT
        ) from None
    if errors := _tier_errors(document):
        raise InvalidPolicyError("the policy document is invalid", errors=errors, hint=_HINT)
    return document


def _tier_errors(document: PolicyDocument) -> list[dict[str, str]]:
    """Each ladder step's tier: known, verifying the ladder's kind, its config valid."""
    errors = []
    for kind, ladder in document.ladders.items():
        for index, step in enumerate(ladder):
            loc = f"ladders.{kind}[{index}].config"
            try:
                tier = get_tier(step.tier)
            except UnknownTierError as exc:
                errors.append({"loc": f"ladders.{kind}[{index}].tier", "msg": str(exc)})
                continue
            if kind not in tier.kinds:
                errors.append(
                    {
                        "loc": f"ladders.{kind}[{index}].tier",
                        "msg": f"tier {step.tier!r} does not verify {kind!r} items "
                        f"(it takes {', '.join(sorted(tier.kinds))})",
                    }
                )
            validate = getattr(tier, "validate_config", None)
            if validate is not None:
                try:
                    validate(step.config)
                except ValueError as exc:
                    errors.append({"loc": loc, "msg": str(exc)})
    return errors


_HINT = "fix the fields named in `errors` and submit again; POST /v1/policies/validate checks"


# Stored versions are immutable and were fully validated when saved, so a parsed version can
# be kept for the life of the process (tiers are not re-checked here).
_VERSIONS: dict[tuple[str, int], PolicyDocument] = {}


def resolve(session: Session, name: str, version: int | None = None) -> ResolvedPolicy:
    """The given (default: active) version of a policy, parsed (cached per version)."""
    if version is None:
        active = repository.active_version(session, name)
        if active is None:
            available = ", ".join(p.name for p in repository.list_policies(session)) or "none"
            raise NotFoundError(
                f"no active policy named {name!r}",
                hint=f"policies available: {available}; create one with POST /v1/policies",
            )
        version = active
    document = _VERSIONS.get((name, version))
    if document is None:
        record = repository.get_version(session, name, version)
        if record is None:
            raise NotFoundError(f"policy {name!r} has no version {version}")
        document = parse_policy(record.document, fmt="json")
        _VERSIONS[(name, version)] = document
    return ResolvedPolicy(name=name, version=version, document=document)


def summary(session: Session, name: str) -> PolicySummary:
    """A policy's versions and which one is active; 404 when there is no such policy."""
    policy = repository.get_policy(session, name)
    if policy is None:
        raise NotFoundError(f"no policy named {name!r}")
    versions = [v.version for v in repository.list_versions(session, name)]
    return PolicySummary(name=name, active_version=policy.active_version, versions=versions)


def summaries(session: Session) -> list[PolicySummary]:
    """Every policy with its versions and which one is active."""
    return [summary(session, p.name) for p in repository.list_policies(session)]


def stored_version(session: Session, name: str, version: int) -> PolicyVersionRecord:
    """A stored version of a policy; 404 when there is none."""
    record = repository.get_version(session, name, version)
    if record is None:
        raise NotFoundError(f"policy {name!r} has no version {version}")
    return record


def is_active(session: Session, name: str, version: int) -> bool:
    policy = repository.get_policy(session, name)
    return policy is not None and policy.active_version == version


def activate(session: Session, name: str, version: int) -> PolicySummary:
    """Make a stored version the one new jobs run under."""
    stored_version(session, name, version)
    repository.set_active(session, name, version)
    return summary(session, name)


def active_or_none(session: Session, name: str) -> ResolvedPolicy | None:
    """The active version of a policy, or None when it has none (or does not exist)."""
    policy = repository.get_policy(session, name)
    if policy is None or policy.active_version is None:
        return None
    return resolve(session, name)


def save(
    session: Session,
    source: str | Mapping[str, Any],
    *,
    fmt: str | None = None,
    activate: bool = True,
    created_by: str = "anonymous",
) -> ResolvedPolicy:
    """Validate and store a new version of the document's policy; activate it if asked."""
    document = validate_document(source, fmt)
    text = source if isinstance(source, str) else ""
    record = repository.add_version(
        session, document.name, document.model_dump(mode="json"), text, created_by
    )
    if activate:
        repository.set_active(session, document.name, record.version)
    return ResolvedPolicy(name=document.name, version=record.version, document=document)


def load_folder(
    session: Session,
    folder: Path,
    *,
    only_missing: bool = False,
    on_error: Callable[[Path, InvalidPolicyError], None] | None = None,
) -> list[str]:
    """Save every *.yaml / *.json policy file in `folder`; returns the names saved.

    An invalid file raises InvalidPolicyError, unless `on_error` is given: then it is reported
    there and skipped.
    """
    saved = []
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml"), *folder.glob("*.json")]):
        text = path.read_text()
        fmt = "json" if path.suffix == ".json" else "yaml"
        try:
            if only_missing:
                name = validate_document(text, fmt).name
                if repository.get_policy(session, name) is not None:
                    continue
            saved.append(save(session, text, fmt=fmt, created_by=f"file:{path.name}").name)
        except InvalidPolicyError as exc:
            if on_error is None:
                raise
            on_error(path, exc)
    return saved
