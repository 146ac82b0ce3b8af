"""Limits kept in Redis: requests and items per minute per API key (its principal cached there)
and per signed-in person, and the back-off of failed sign-ins per user and per address."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime

import redis
import structlog

from verifier_service.auth.errors import RateLimitedError
from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.settings import AuthSettings

log = structlog.get_logger(__name__)


# --- rate limits -------------------------------------------------------------------------------

# GCRA (a token bucket that holds a minute's worth): one key per limit, holding the time at
# which the bucket is theoretically empty. Redis's own clock, so API processes agree.
_GCRA = """
local function take(key, per_min, cost)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local interval = 60000 / per_min
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local new_tat = tat + interval * cost
  local allow_at = new_tat - 60000
  if allow_at > now then return math.ceil(allow_at - now) end
  redis.call('SET', key, tostring(new_tat), 'PX', math.ceil(new_tat - now) + 1000)
  return 0
end
"""
# Take ARGV[2] units of KEYS[1] at ARGV[1] per minute: milliseconds to wait, 0 when taken.
_TAKE = _GCRA + "return take(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))"
# A cached key (KEYS[1]) and, if found, one request of its limit (KEYS[2]): one round trip.
_CACHED_AND_TAKE = (
    _GCRA
    + """
local cached = redis.call('GET', KEYS[1])
if not cached then return false end
local per_min = tonumber(cjson.decode(cached)['rpm'])
if per_min <= 0 then return {cached, 0} end
return {cached, take(KEYS[2], per_min, 1)}
"""
)
KEY_CACHE_TTL_S = 60


def _limit(own: int | None, defaults: dict[str, int], roles: frozenset[str]) -> int:
    if own is not None:
        return own
    return max((defaults.get(r, 0) for r in roles), default=0)


def _hashed(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:32]


class RateLimiter:
    """Requests and items per minute per API key, in Redis; and the keys' principals cached
    there for a minute, so that a request costs one Redis round trip and no database query.

    A person signed in (a session cookie) has the same limits, by role, per principal: every
    session of one person shares them, so signing in is no way around a key's limits.

    Revoking a key drops it from the cache (`forget`); a key whose cache entry could not be
    dropped (Redis away at that moment) keeps working until the entry's minute runs out.
    """

    def __init__(self, client: redis.Redis, settings: AuthSettings) -> None:
        self.client = client
        self.settings = settings
        self._take_script = client.register_script(_TAKE)
        self._cached_script = client.register_script(_CACHED_AND_TAKE)

    @staticmethod
    def _cache_key(key_hash: str) -> str:
        return f"verifier:key:{key_hash}"

    @staticmethod
    def _requests_key(key_hash: str) -> str:
        return f"verifier:rl:req:{key_hash[:32]}"

    def _requests_per_min(self, principal: AuthenticatedPrincipal) -> int:
        return _limit(principal.requests_per_min, self.settings.requests_per_min, principal.roles)

    @staticmethod
    def _over(per_min: int, wait_ms: int, what: str, whose: str = "this key's") -> RateLimitedError:
        return RateLimitedError(
            f"over {whose} limit of {per_min} {what} per minute",
            retry_after_s=max(1, math.ceil(wait_ms / 1000)),
        )

    def person_request(self, principal: AuthenticatedPrincipal) -> None:
        """Take one request from a signed-in person's limit (per principal; 429 when over)."""
        per_min = self._requests_per_min(principal)
        if per_min <= 0:
            return
        wait_ms = self._take(f"verifier:rl:req:person:{_hashed(principal.name)}", per_min, 1)
        if wait_ms:
            raise self._over(per_min, wait_ms, "requests", f"{principal.name}'s")

    def cached(self, key_hash: str) -> AuthenticatedPrincipal | None:
        """The principal of a cached key, with one request taken from its limit (429 when
        over); None when the key is not cached."""
        try:
            found = self._cached_script(
                keys=[self._cache_key(key_hash), self._requests_key(key_hash)]
            )
        except redis.RedisError:
            log.warning("API key cache unavailable: Redis did not answer")
            return None
        if not found:
            return None
        principal = self._principal(found[0])
        if int(found[1]):
            raise self._over(self._requests_per_min(principal), int(found[1]), "requests")
        return principal

    @staticmethod
    def _principal(cached: str | bytes) -> AuthenticatedPrincipal:
        record = json.loads(cached)
        expires_at = record["expires_at"]
        return AuthenticatedPrincipal(
            name=record["name"],
            roles=frozenset(record["roles"]),
            via="key",
            key_id=record["key_id"],
            requests_per_min=record["requests_per_min"],
            items_per_min=record["items_per_min"],
            expires_at=datetime.fromisoformat(expires_at) if expires_at else None,
        )

    def peek(self, key_hash: str) -> AuthenticatedPrincipal | None:
        """The principal of a cached key, taking nothing from its limit (an open events
        stream checking its key again); None when the key is not cached."""
        try:
            found = self.client.get(self._cache_key(key_hash))
        except redis.RedisError:
            log.warning("API key cache unavailable: Redis did not answer")
            return None
        return None if found is None else self._principal(found)

    def remember(
        self, key_hash: str, principal: AuthenticatedPrincipal, *, take: bool = True
    ) -> None:
        """Cache a key found in the database, and take one request from its limit (unless
        not `take`)."""
        record = {
            "name": principal.name,
            "roles": sorted(principal.roles),
            "key_id": principal.key_id,
            "requests_per_min": principal.requests_per_min,
            "items_per_min": principal.items_per_min,
            "expires_at": principal.expires_at.isoformat() if principal.expires_at else None,
            "rpm": self._requests_per_min(principal),
        }
        try:
            self.client.set(self._cache_key(key_hash), json.dumps(record), ex=KEY_CACHE_TTL_S)
        except redis.RedisError:
            log.warning("API key cache unavailable: Redis did not answer")
        per_min = self._requests_per_min(principal)
        if take and per_min > 0:
            wait_ms = self._take(self._requests_key(key_hash), per_min, 1)
            if wait_ms:
                raise self._over(per_min, wait_ms, "requests")

    def forget(self, key_hash: str) -> None:
        """Drop a key from the cache (it was revoked)."""
        try:
            self.client.delete(self._cache_key(key_hash))
        except redis.RedisError:
            log.warning(
                "revoked key not dropped from the API's cache: Redis did not answer; it stops "
                f"working within {KEY_CACHE_TTL_S} s"
            )

    def _take(self, key: str, per_min: int, cost: int) -> int:
        try:
            return int(self._take_script(keys=[key], args=[per_min, cost]))
        except redis.RedisError:
            log.warning("rate limit not checked: Redis unavailable")
            return 0

    def items(self, principal: AuthenticatedPrincipal, n: int) -> None:
        """Take `n` items from the key's (a signed-in person's: the principal's)
        items-per-minute limit (429 when over)."""
        if principal.via == "key" and principal.key_id is not None:
            bucket, whose = f"verifier:rl:items:{principal.key_id}", "this key's"
        elif principal.via == "session":
            bucket = f"verifier:rl:items:person:{_hashed(principal.name)}"
            whose = f"{principal.name}'s"
        else:  # dev's local admin
            return
        if n <= 0:
            return
        per_min = _limit(principal.items_per_min, self.settings.items_per_min, principal.roles)
        if per_min <= 0:
            return
        if n > per_min:
            raise RateLimitedError(
                f"{n} items in one request exceed {whose} limit of {per_min} items per "
                "minute; split them over several requests", retry_after_s=60,
            )  # fmt: skip
        wait_ms = self._take(bucket, per_min, n)
        if wait_ms:
            raise self._over(per_min, wait_ms, "items", whose)


class SignInThrottle:
    """Per-username and per-address back-off after failed sign-ins, kept in Redis.

    Below the threshold nothing waits; from it on, every failure doubles the wait (1, 2, 4 s
    ... up to the maximum) before the next try is even checked.
    """

    def __init__(self, client: redis.Redis, settings: AuthSettings) -> None:
        self.client = client
        self.settings = settings

    @staticmethod
    def _keys(username: str, address: str) -> list[tuple[str, int]]:
        user = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
        return [(f"verifier:signin:user:{user}", 0), (f"verifier:signin:addr:{address}", 1)]

    def _thresholds(self) -> tuple[int, int]:
        return self.settings.signin_failures_per_user, self.settings.signin_failures_per_address

    def wait_s(self, username: str, address: str) -> int:
        """Seconds before this username or address may try again (0: now)."""
        pipe = self.client.pipeline(transaction=False)
        for key, _ in self._keys(username, address):
            pipe.pttl(key + ":lock")
        waits = [int(ms) for ms in pipe.execute()]
        return max(0, math.ceil(max(waits) / 1000))

    def failed(self, username: str, address: str) -> None:
        horizon = int(self.settings.signin_max_backoff_s * 4) + 60
        thresholds = self._thresholds()
        for key, which in self._keys(username, address):
            count = int(self.client.incr(key))
            self.client.expire(key, horizon)
            over = count - thresholds[which]
            if over >= 0:
                wait = min(2.0**over, self.settings.signin_max_backoff_s)
                self.client.set(key + ":lock", "1", px=int(wait * 1000))

    def succeeded(self, username: str, address: str) -> None:
        key, _ = self._keys(username, address)[0]
        self.client.delete(key, key + ":lock")
