"""Pydantic shapes of principals, keys and audit events, and the authenticated principal."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

#: Principal names: what jobs, costs and budgets are recorded under.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$"


class Role(StrEnum):
    """What a principal may do."""

    trainer = "trainer"  # the reward API, its own jobs, /run_code, the framework adapters
    reviewer = "reviewer"  # the review web app
    operator = "operator"  # policies, tiers, replay, every job
    admin = "admin"  # principals, keys, users, the audit log
    oracle = "oracle"  # an outside system (a lab, a market): its own oracle's batches, results


ALL_ROLES = frozenset(Role)


@dataclass(frozen=True)
class AuthenticatedPrincipal:
    """Who is calling, how they proved it, and the limits of the key they used."""

    name: str
    roles: frozenset[str]
    via: Literal["key", "session", "local"]
    key_id: str | None = None
    requests_per_min: int | None = None
    items_per_min: int | None = None
    #: When the key stops working (None: until revoked).
    expires_at: datetime | None = None
    #: Set when an operator submits work as another principal (X-Principal).
    on_behalf_of: str | None = None

    @property
    def acting_as(self) -> str:
        """The principal jobs, costs and budgets are recorded under."""
        return self.on_behalf_of or self.name

    def sees_all_jobs(self) -> bool:
        return Role.operator in self.roles


class KeyIn(BaseModel):
    """A new API key for a (new or existing) principal."""

    name: str = Field(pattern=NAME_PATTERN, description="The principal the key acts as.")
    roles: list[Role] = Field(min_length=1, description="Roles of the principal.")
    expires_in_s: float | None = Field(
        default=None,
        gt=0,
        le=10 * 366 * 86400,
        description="Lifetime (at most 10 years); none: until revoked.",
    )
    requests_per_min: int | None = Field(
        default=None, ge=0, le=2**31 - 1, description="Overrides the role default; 0: no limit."
    )
    items_per_min: int | None = Field(
        default=None, ge=0, le=2**31 - 1, description="Overrides the role default; 0: no limit."
    )


class KeyOut(BaseModel):
    """An API key as listings show it: never the key itself."""

    id: str
    principal: str
    roles: list[str]
    prefix: str = Field(description="The key's first characters, to tell keys apart.")
    created_at: datetime
    created_by: str
    expires_at: datetime | None
    revoked_at: datetime | None
    state: Literal["active", "expired", "revoked"]
    requests_per_min: int | None
    items_per_min: int | None


class KeyCreatedOut(KeyOut):
    """A new key, with the key itself: shown this once, stored only as a hash."""

    key: str


class PrincipalOut(BaseModel):
    """The caller as the service sees it."""

    name: str
    roles: list[str]
    via: str
    on_behalf_of: str | None = None


class AuditEventOut(BaseModel):
    """One audited action."""

    id: int
    at: datetime
    actor: str
    action: str
    target: str
    detail: dict[str, Any]
