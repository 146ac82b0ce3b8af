"""HTTP API of identity and access: who am I, keys and the audit log (admins)."""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path, Query

from verifier_service.auth import service
from verifier_service.auth.deps import (
    AdminPrincipal,
    AnyPrincipal,
    rate_limiter,
)
from verifier_service.auth.schemas import (
    AuditEventOut,
    KeyCreatedOut,
    KeyIn,
    KeyOut,
    PrincipalOut,
)
from verifier_service.core.db import transaction
from verifier_service.core.deps import SessionDep, SettingsDep

ACTION_PATTERN = r"^[a-z][a-z_.]{0,63}$"

router = APIRouter(tags=["auth"])


@router.get("/v1/me")
def me(principal: AnyPrincipal) -> PrincipalOut:
    """Who the service takes the caller to be, and with which roles."""
    return PrincipalOut(
        name=principal.name,
        roles=sorted(principal.roles),
        via=principal.via,
        on_behalf_of=principal.on_behalf_of,
    )


@router.get("/v1/keys")
def list_keys(session: SessionDep, _: AdminPrincipal) -> list[KeyOut]:
    """Every API key (prefix, principal, roles, state); never the keys themselves."""
    return service.list_keys(session)


@router.post("/v1/keys", status_code=201)
def create_key(body: KeyIn, session: SessionDep, principal: AdminPrincipal) -> KeyCreatedOut:
    """A new API key, shown this once; only its hash is stored."""
    return service.create_key(
        session,
        name=body.name,
        roles=body.roles,
        created_by=principal.name,
        expires_in=timedelta(seconds=body.expires_in_s) if body.expires_in_s else None,
        requests_per_min=body.requests_per_min,
        items_per_min=body.items_per_min,
    )


KeyRef = Annotated[
    str, Path(pattern=r"^[A-Za-z0-9_]{1,64}$", description="A key's id or prefix (vsk_...).")
]


@router.post("/v1/keys/{key_ref}/revoke")
def revoke_key(key_ref: KeyRef, settings: SettingsDep, principal: AdminPrincipal) -> KeyOut:
    """Revoke a key by id or prefix: it stops working at once."""
    with transaction() as session:
        revoked, key_hash = service.revoke_key(session, key_ref, principal.name)
    # After the commit: a request in between must not cache the key as still valid.
    rate_limiter(settings.broker_url).forget(key_hash)
    return revoked


@router.get("/v1/audit")
def audit_log(
    session: SessionDep,
    _: AdminPrincipal,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    before_id: Annotated[
        int | None, Query(ge=1, le=2**31 - 1, description="Page: events older than this id.")
    ] = None,
    action: Annotated[
        str | None,
        Query(pattern=ACTION_PATTERN, description="Only this action, e.g. key.create."),
    ] = None,
) -> list[AuditEventOut]:
    """Who did what to policies, keys and users, newest first."""
    return service.audit_events(session, limit=limit, before_id=before_id, action=action)


class _RedactKeysInPaths(logging.Filter):
    """Access logs print the request path: hide keys sent in `/k/{api_key}/...` paths."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _KEY_IN_PATH.sub("/k/***/", a) if isinstance(a, str) else a for a in record.args
            )
        return True


_KEY_IN_PATH = re.compile(r"/k/[^/?\s]+/")


def redact_keys_in_access_log() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _RedactKeysInPaths) for f in access.filters):
        access.addFilter(_RedactKeysInPaths())
