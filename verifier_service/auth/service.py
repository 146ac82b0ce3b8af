"""Identity and access: API keys, passwords, people's sessions, roles, audit (the Redis-backed
limits are in limits.py, CSRF tokens in csrf.py).

Services never commit: the caller's transaction does.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import structlog
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy.orm import Session

from verifier_service.auth import repository
from verifier_service.auth.errors import ForbiddenError, NotAuthenticatedError
from verifier_service.auth.models import ApiKey, Principal, User, WebSession
from verifier_service.auth.schemas import (
    ALL_ROLES,
    NAME_PATTERN,
    AuditEventOut,
    AuthenticatedPrincipal,
    KeyCreatedOut,
    KeyOut,
    Role,
)
from verifier_service.core.db import utcnow
from verifier_service.core.errors import ConflictError, InvalidRequestError, NotFoundError
from verifier_service.settings import AuthSettings

log = structlog.get_logger(__name__)

KEY_PREFIX = "vsk_"
#: vsk_<12 hex: the prefix listings show>_<43 url-safe characters: 256 random bits>
KEY_PATTERN = re.compile(r"^vsk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
LOCAL_ADMIN = "local-admin"
_hasher = PasswordHasher()


# --- API keys -------------------------------------------------------------------------------


def hash_key(key: str) -> str:
    # Keys carry 256 random bits, so one fast hash is enough: there is nothing to guess, and a
    # slow hash (argon2) would add tens of milliseconds to every request.
    return hashlib.sha256(key.encode()).hexdigest()


def _ensure_principal(session: Session, name: str, roles: Iterable[str]) -> Principal:
    if not re.fullmatch(NAME_PATTERN, name):
        raise InvalidRequestError(
            f"invalid principal name {name!r}",
            hint="letters, digits and . _ @ -, starting with a letter or digit, at most 128",
        )
    wanted = sorted({Role(r).value for r in roles})
    principal = repository.principal_by_name(session, name)
    if principal is None:
        principal = Principal(name=name, roles=wanted)
        session.add(principal)
        session.flush()
    elif not set(wanted) <= set(principal.roles):
        principal.roles = sorted(set(principal.roles) | set(wanted))
    return principal


def key_out(key: ApiKey, principal: Principal, now: datetime | None = None) -> KeyOut:
    now = now or utcnow()
    state = (
        "revoked"
        if key.revoked_at is not None
        else "expired"
        if key.expires_at is not None and key.expires_at <= now
        else "active"
    )
    return KeyOut(
        id=key.id,
        principal=principal.name,
        roles=list(principal.roles),
        prefix=KEY_PREFIX + key.prefix,
        created_at=key.created_at,
        created_by=key.created_by,
        expires_at=key.expires_at,
        revoked_at=key.revoked_at,
        state=state,
        requests_per_min=key.requests_per_min,
        items_per_min=key.items_per_min,
    )


def create_key(
    session: Session,
    *,
    name: str,
    roles: Iterable[str],
    created_by: str,
    expires_in: timedelta | None = None,
    requests_per_min: int | None = None,
    items_per_min: int | None = None,
) -> KeyCreatedOut:
    """A new key for principal `name` (created with `roles`, or given them): shown only here."""
    principal = _ensure_principal(session, name, roles)
    prefix = secrets.token_hex(6)
    key = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    now = utcnow()
    record = ApiKey(
        principal_id=principal.id,
        prefix=prefix,
        key_hash=hash_key(key),
        created_at=now,
        created_by=created_by,
        expires_at=now + expires_in if expires_in else None,
        requests_per_min=requests_per_min,
        items_per_min=items_per_min,
    )
    session.add(record)
    session.flush()
    record_event(
        session, created_by, "key.create", KEY_PREFIX + prefix,
        principal=name, roles=list(principal.roles),
        expires_at=record.expires_at.isoformat() if record.expires_at else None,
    )  # fmt: skip
    return KeyCreatedOut(**key_out(record, principal, now).model_dump(), key=key)


def list_keys(session: Session) -> list[KeyOut]:
    now = utcnow()
    return [key_out(k, p, now) for k, p in repository.list_keys(session)]


def revoke_key(session: Session, ref: str, actor: str) -> tuple[KeyOut, str]:
    """Revoke a key given its id or prefix (with or without `vsk_`): the key as listed, and its
    hash, which the caller drops from the API's cache (RateLimiter.forget) after commit."""
    record = repository.key_by_id_or_prefix(session, ref.removeprefix(KEY_PREFIX))
    if record is None:
        raise NotFoundError(f"no key with id or prefix {ref!r}", hint="see `keys list`")
    if record.revoked_at is None:
        record.revoked_at = utcnow()
        record_event(session, actor, "key.revoke", KEY_PREFIX + record.prefix)
    principal = session.get(Principal, record.principal_id)
    assert principal is not None
    return key_out(record, principal), record.key_hash


def authenticate_key(session: Session, key: str) -> AuthenticatedPrincipal:
    """The principal a key belongs to; 401 saying why when it is malformed, unknown, expired
    or revoked. The key itself never appears in a message or a log."""
    found = repository.key_by_prefix(session, check_key_format(key))
    if found is None or not hmac.compare_digest(found[0].key_hash, hash_key(key)):
        raise NotAuthenticatedError(
            "unknown API key", reason="unknown", hint="ask an admin for a key (`keys create`)"
        )
    record, principal = found
    shown = KEY_PREFIX + record.prefix
    if record.revoked_at is not None:
        raise NotAuthenticatedError(
            f"API key {shown} was revoked at {record.revoked_at.isoformat()}",
            reason="revoked", hint="ask an admin for a new key",
        )  # fmt: skip
    if record.expires_at is not None and record.expires_at <= utcnow():
        raise NotAuthenticatedError(
            f"API key {shown} expired at {record.expires_at.isoformat()}",
            reason="expired", hint="ask an admin for a new key",
        )  # fmt: skip
    return AuthenticatedPrincipal(
        name=principal.name,
        roles=frozenset(principal.roles),
        via="key",
        key_id=record.id,
        requests_per_min=record.requests_per_min,
        items_per_min=record.items_per_min,
        expires_at=record.expires_at,
    )


def check_key_format(key: str) -> str:
    """The key's prefix; 401 when the key cannot be one of ours."""
    match = KEY_PATTERN.fullmatch(key)
    if match is None:
        raise NotAuthenticatedError(
            "malformed API key", reason="malformed",
            hint="send `Authorization: Bearer vsk_...` with the whole key as it was shown",
        )  # fmt: skip
    return match.group(1)


def check_not_expired(principal: AuthenticatedPrincipal, prefix: str) -> None:
    if principal.expires_at is not None and principal.expires_at <= utcnow():
        raise NotAuthenticatedError(
            f"API key {KEY_PREFIX}{prefix} expired at {principal.expires_at.isoformat()}",
            reason="expired", hint="ask an admin for a new key",
        )  # fmt: skip


def local_admin() -> AuthenticatedPrincipal:
    """Who an unauthenticated local request is on `verifier-service dev` without --auth."""
    return AuthenticatedPrincipal(name=LOCAL_ADMIN, roles=ALL_ROLES, via="local")


def on_behalf_of(principal: AuthenticatedPrincipal, name: str | None) -> AuthenticatedPrincipal:
    """Honour X-Principal from operators only: they may submit work as another principal.

    From anyone else it is ignored (their work is recorded under their own principal): old
    clients that still send it keep working, and nobody can charge another's budget.
    """
    if name is None or name == principal.name or not principal.sees_all_jobs():
        return principal
    return replace(principal, on_behalf_of=name)


def require_roles(principal: AuthenticatedPrincipal, roles: frozenset[str]) -> None:
    if not principal.roles & roles:
        raise ForbiddenError(
            f"principal {principal.name!r} lacks the role this needs: {' or '.join(sorted(roles))}",
            hint="use a key or account with that role",
        )


# --- people: passwords, sessions, sign-in back-off ------------------------------------------


def create_user(
    session: Session, name: str, roles: Iterable[str], password: str, actor: str
) -> None:
    _check_new_password(password)
    principal = _ensure_principal(session, name, roles)
    if session.get(User, principal.id) is not None:
        raise ConflictError(f"user {name!r} exists", hint="choose another name")
    session.add(User(principal_id=principal.id, password_hash=_hasher.hash(password)))
    record_event(session, actor, "user.create", name, roles=list(principal.roles))


MIN_PASSWORD_LENGTH = 12


def _check_new_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidRequestError(
            "password too short", hint=f"use at least {MIN_PASSWORD_LENGTH} characters"
        )


def change_password(
    session: Session, username: str, current: str, new: str, session_token: str | None
) -> int:
    """A person changes their own password: the current one must be right. Their other
    sessions end (a stolen cookie stops working with the old password); this browser's, whose
    token is `session_token`, stays. How many sessions ended."""
    principal = check_password(session, username, current)
    if principal is None:
        raise InvalidRequestError("the current password is wrong", hint="type it again")
    _check_new_password(new)
    if new == current:
        raise InvalidRequestError(
            "the new password is the current one", hint="choose a different password"
        )
    return _set_password(session, principal, new, keep=session_token, actor=username,
                         action="user.password_change")  # fmt: skip


def reset_password(session: Session, username: str, new: str, actor: str) -> int:
    """An administrator sets a person's password (they forgot it, or it leaked): every session
    of theirs ends. How many ended."""
    found = repository.user_by_name(session, username)
    if found is None:
        raise NotFoundError(f"no user {username!r}", hint="`users create` makes one")
    _check_new_password(new)
    return _set_password(session, found[1], new, keep=None, actor=actor,
                         action="user.password_reset")  # fmt: skip


def _set_password(
    session: Session, principal: Principal, new: str, *, keep: str | None, actor: str,
    action: str,
) -> int:  # fmt: skip
    user = session.get(User, principal.id)
    if user is None:  # a principal with keys only: nothing signs in with a password
        raise NotFoundError(f"no user {principal.name!r}", hint="`users create` makes one")
    user.password_hash = _hasher.hash(new)
    ended = repository.delete_web_sessions_of(
        session, principal.id, keep=hash_key(keep) if keep else None
    )
    record_event(session, actor, action, principal.name, sessions_ended=ended)
    return ended


#: Verified against when the username is unknown, so both cases take the same time.
_DUMMY_HASH = _hasher.hash(secrets.token_urlsafe(16))


def check_password(session: Session, username: str, password: str) -> Principal | None:
    """The user's principal when the password is right; None otherwise, whether or not the
    user exists (same work either way)."""
    # A name that cannot exist is not looked up (NUL bytes would not even reach PostgreSQL),
    # but costs the same hash verification.
    possible = re.fullmatch(NAME_PATTERN, username) is not None
    found = repository.user_by_name(session, username) if possible else None
    try:
        _hasher.verify(found[0].password_hash if found else _DUMMY_HASH, password)
    except (VerificationError, InvalidHashError):
        return None
    if found is None:
        return None
    user, principal = found
    if _hasher.check_needs_rehash(user.password_hash):
        user.password_hash = _hasher.hash(password)
    return principal


def start_web_session(session: Session, principal: Principal, ttl_s: float) -> str:
    """A new session for a signed-in person: the cookie's token (only its hash is stored)."""
    token = secrets.token_urlsafe(32)
    now = utcnow()
    repository.delete_expired_web_sessions(session, now)
    session.add(
        WebSession(
            id=hash_key(token),
            principal_id=principal.id,
            created_at=now,
            expires_at=now + timedelta(seconds=ttl_s),
        )
    )
    return token


def web_session_principal(session: Session, token: str) -> AuthenticatedPrincipal | None:
    principal = repository.session_principal(session, hash_key(token), utcnow())
    if principal is None:
        return None
    return AuthenticatedPrincipal(
        name=principal.name, roles=frozenset(principal.roles), via="session"
    )


def end_web_session(session: Session, token: str) -> None:
    repository.delete_web_session(session, hash_key(token))


# --- audit -------------------------------------------------------------------------------------


def record_event(session: Session, actor: str, action: str, target: str, **detail: Any) -> None:
    """Add an audit event to the caller's transaction."""
    repository.add_audit(session, actor, action, target, detail)


def audit_events(
    session: Session, *, limit: int, before_id: int | None = None, action: str | None = None
) -> list[AuditEventOut]:
    return [
        AuditEventOut.model_validate(e, from_attributes=True)
        for e in repository.list_audit(session, limit=limit, before_id=before_id, action=action)
    ]


# --- configuration -----------------------------------------------------------------------------

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> timedelta:
    """`90s`, `15m`, `12h`, `30d`, `2w`."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a duration such as 30d, 12h, 15m")
    return timedelta(seconds=float(match.group(1)) * _UNIT_S[match.group(2)])


def startup_problems(session: Session, settings: AuthSettings) -> list[str]:
    """What keeps a production API from starting with auth on: empty when all is set."""
    problems = []
    if settings.local_admin:
        problems.append(
            "VERIFIER_AUTH__LOCAL_ADMIN is set: unauthenticated requests would act as an admin "
            "(that is for `verifier-service dev` only)"
        )
    if settings.secret_key is None:
        problems.append(
            "no session secret: set VERIFIER_AUTH__SECRET_KEY, e.g. to the output of "
            "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    if not repository.any_usable_credential(session, utcnow()):
        problems.append(
            "nobody can sign in: create a key with `verifier-service keys create --role admin "
            "--name admin` (and trainer keys with --role trainer), or a person with "
            "`verifier-service users create --role admin NAME`"
        )
    return problems
