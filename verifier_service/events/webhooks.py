"""Webhooks to trainers: which callback URLs the service calls, how a delivery is signed
(Standard Webhooks), and one delivery attempt with its retry schedule.

A delivery is staged in the transaction that wrote its event and sent by the `callbacks.deliver`
task after commit. Each attempt is recorded; a failed one is retried with exponential backoff
(a new outbox message with an ETA) until `webhooks.retry_for_s` after the event.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import socket
import time
from datetime import timedelta
from functools import lru_cache
from urllib.parse import urlsplit

import httpx
import structlog

from verifier_service import __version__
from verifier_service.core import outbox
from verifier_service.core.db import transaction, utcnow
from verifier_service.core.outbox import OutboxMessage
from verifier_service.events import repository
from verifier_service.events.errors import CallbackRefusedError
from verifier_service.events.models import WebhookAttempt
from verifier_service.events.schemas import JobEventOut
from verifier_service.settings import WebhookSettings, get_settings

log = structlog.get_logger(__name__)

DELIVER_TASK = "callbacks.deliver"
CALLBACKS_QUEUE = "callbacks"
SECRET_PREFIX = "whsec_"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


# ---------------------------------------------------------------- which URLs may be called


def _public(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _listed(host: str, allowed: list[str]) -> bool:
    address = _literal(host)
    for entry in allowed:
        entry = entry.strip().lower()
        if entry.startswith("*.") and host.endswith(entry[1:]):
            return True
        if host == entry:
            return True
        if address is not None:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
    return False


def refusal(url: str, settings: WebhookSettings) -> str | None:
    """Why the service will not call `url` (checked without DNS), or None when it may."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"scheme {parts.scheme!r}: callbacks must be http or https URLs"
    host = (parts.hostname or "").lower()
    if not host:
        return "the URL names no host"
    if parts.username or parts.password:
        return "callback URLs must not carry credentials"
    if settings.allowed_hosts:
        if _listed(host, settings.allowed_hosts):
            return None
        return f"host {host!r} is not in this service's allowed callback hosts"
    if settings.allow_private:
        return None
    address = _literal(host)
    if address is not None and not _public(address):
        return f"{host} is not a public address"
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        return f"{host} is not a public host"
    return None


def check_callback(url: str, settings: WebhookSettings) -> None:
    """Refuse (CallbackRefusedError) a callback the service will not call."""
    if settings.secret is None:
        raise CallbackRefusedError(
            "this service sends no webhooks: it has no signing secret",
            hint="leave out `callback` and follow GET /v1/jobs/{id}/events, or ask the operator "
            "to set VERIFIER_WEBHOOKS__SECRET",
        )
    why = refusal(url, settings)
    if why is not None:
        hint = (
            f"allowed hosts: {', '.join(settings.allowed_hosts)}"
            if settings.allowed_hosts
            else "use a public http(s) URL"
        )
        raise CallbackRefusedError(f"callback.url refused: {why}", hint=hint)


def resolved_refusal(url: str, settings: WebhookSettings) -> str | None:
    """At delivery: why not, looking at every address the host resolves to now (a public name
    may point at a private address)."""
    why = refusal(url, settings)
    if why is not None or settings.allowed_hosts or settings.allow_private:
        return why
    parts = urlsplit(url)
    host = parts.hostname or ""
    if _literal(host) is not None:
        return None
    try:
        infos = socket.getaddrinfo(host, parts.port or 443, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        return f"cannot resolve {host}: {exc}"
    for info in infos:
        address = _literal(str(info[4][0]))
        if address is not None and not _public(address):
            return f"{host} resolves to {address}, not a public address"
    return None


# ---------------------------------------------------------------- signing


def secret_bytes(secret: str) -> bytes:
    """The key of a `whsec_<base64>` secret."""
    try:
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not a {SECRET_PREFIX}<base64> webhook secret") from exc


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The webhook-signature header: `v1,` and base64 of HMAC-SHA256 of `id.timestamp.body`."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_bytes(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


# ---------------------------------------------------------------- one signed POST


@lru_cache(maxsize=4)
def _client(timeout_s: float) -> httpx.Client:
    # One per worker process and timeout (connections reused). No redirects: one could lead past
    # the hosts the caller checked.
    return httpx.Client(timeout=timeout_s, follow_redirects=False)


def post_signed(
    url: str, msg_id: str, body: bytes, secret: str, timeout_s: float
) -> tuple[int | None, str | None]:
    """POST `body` (JSON) to `url` signed as Standard Webhooks with `secret` (`whsec_<base64>`):
    the HTTP status (None when no answer came) and the error (None on a 2xx)."""
    timestamp = int(time.time())
    headers = {
        "content-type": "application/json",
        "user-agent": f"verifier-service/{__version__}",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, msg_id, timestamp, body),
    }
    try:
        response = _client(timeout_s).post(url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:1000]
    if 200 <= response.status_code < 300:
        return response.status_code, None
    return response.status_code, f"HTTP {response.status_code}: {response.text[:200]}"


def backoff_s(attempt: int, first_s: float, max_s: float) -> float:
    """Wait after failed attempt `attempt` (1-based): doubling from `first_s`, capped at `max_s`."""
    return float(min(first_s * 2.0 ** (attempt - 1), max_s))


# ---------------------------------------------------------------- one delivery attempt


def attempt(delivery_id: str) -> str | None:
    """Make the next attempt of a delivery (the `callbacks.deliver` task); its status after, or
    None when there was nothing to do (delivered already, or another copy of the task has it)."""
    settings = get_settings().webhooks
    with transaction() as session:
        delivery = repository.lock_delivery(session, delivery_id)
        now = utcnow()
        if delivery is None or delivery.status != "pending":
            return None
        if settings.secret is None:
            log.error("webhook not sent: this worker has no VERIFIER_WEBHOOKS__SECRET")
            return None
        if delivery.busy_until is not None and delivery.busy_until > now:
            return None  # a second copy of the task while the first is sending
        if delivery.next_attempt_at is not None and delivery.next_attempt_at > now + timedelta(
            seconds=1
        ):
            return None  # an early copy: the scheduled message comes at next_attempt_at
        event = repository.event(session, delivery.event_id)
        assert event is not None
        body = JobEventOut(
            id=event.id, type=event.kind, job_id=event.job_id,
            timestamp=event.created_at, data=event.data,
        ).model_dump_json().encode()  # fmt: skip
        delivery.busy_until = now + timedelta(seconds=settings.timeout_s + 30)
        number, url, created_at = delivery.attempts + 1, delivery.url, delivery.created_at

    started, clock = utcnow(), time.perf_counter()
    why = resolved_refusal(url, settings)
    secret = settings.secret.get_secret_value()
    status_code, error = (
        (None, f"refused: {why}")
        if why
        else post_signed(url, delivery_id, body, secret, settings.timeout_s)
    )
    duration_ms = (time.perf_counter() - clock) * 1000

    retry: OutboxMessage | None = None
    with transaction() as session:
        delivery = repository.lock_delivery(session, delivery_id)
        assert delivery is not None
        now = utcnow()
        delivery.attempts, delivery.busy_until = number, None
        repository.add_attempt(
            session,
            WebhookAttempt(
                delivery_id=delivery_id, number=number, started_at=started,
                status_code=status_code, error=error, duration_ms=round(duration_ms, 3),
            ),
        )  # fmt: skip
        wait_s = backoff_s(number, settings.retry_first_s, settings.retry_max_s)
        next_at = now + timedelta(seconds=wait_s)
        if error is None:
            delivery.status, delivery.finished_at, delivery.next_attempt_at = "delivered", now, None
        elif why is not None or next_at > created_at + timedelta(seconds=settings.retry_for_s):
            delivery.status, delivery.finished_at, delivery.next_attempt_at = "failed", now, None
        else:
            delivery.next_attempt_at = next_at
            retry = OutboxMessage(
                task=DELIVER_TASK, args=[delivery_id], queue=CALLBACKS_QUEUE, eta=next_at,
                created_at=now,
            )  # fmt: skip
            outbox.stage(session, [retry])
        status = delivery.status
    if retry is not None:
        sent = outbox.send([retry])
        if sent:
            with transaction() as session:
                outbox.forget(session, sent)
    log.info("webhook attempt", delivery=delivery_id, number=number, code=status_code,
             error=error, status=status)  # fmt: skip
    return status


def resend_overdue(grace_s: float, limit: int = 500) -> int:
    """Send again the attempts overdue by more than `grace_s` (the recovery sweep); how many."""
    with transaction() as session:
        overdue = repository.overdue_deliveries(
            session, utcnow() - timedelta(seconds=grace_s), limit
        )
    messages = [
        OutboxMessage(task=DELIVER_TASK, args=[i], queue=CALLBACKS_QUEUE, eta=None) for i in overdue
    ]
    sent = outbox.send(messages)
    if sent:
        log.warning("sent overdue webhook deliveries again", deliveries=len(sent))
    return len(sent)
