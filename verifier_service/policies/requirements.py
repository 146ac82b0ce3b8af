"""Which active policies have steps this process cannot run for want of an optional extra.

A shipped policy can name a tier whose work needs a package the README's install leaves out
(chem.surrogate's xTB needs tblite, chem.dft PySCF: the `quantum` extra). Every item climbing to
such a step would end with an error verdict; the processes that run tiers say so at start-up
instead, naming the policy, the step and the extra.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from tiers.registry import UnknownTierError, get_tier
from verifier_service.policies import repository
from verifier_service.policies.service import active_or_none


def missing_extras(session: Session, queues: set[str] | None = None) -> list[str]:
    """One line per active policy step (of a tier on `queues`, or any) that lacks packages."""
    lines = []
    for record in repository.list_policies(session):
        policy = active_or_none(session, record.name)
        if policy is None:
            continue
        for kind, steps in policy.document.ladders.items():
            for step in steps:
                try:
                    tier = get_tier(step.tier)
                except UnknownTierError:
                    continue
                if queues is not None and tier.queue not in queues:
                    continue
                check = getattr(tier, "missing_packages", None)
                missing = check(step.config) if callable(check) else []
                if missing:
                    lines.append(
                        f"policy {policy.name} ({kind}): step {step.tier} needs "
                        f"{', '.join(missing)}; its items will end with an error verdict until "
                        "it is installed on the hosts that run it"
                    )
    return lines
