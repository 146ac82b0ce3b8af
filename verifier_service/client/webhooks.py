"""For trainers that receive the service's webhooks: check a delivery's signature.

Deliveries follow Standard Webhooks: headers `webhook-id`, `webhook-timestamp` (Unix seconds)
and `webhook-signature` (`v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, several
space-separated while the service's secret is being rotated), keyed with the `whsec_` secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

from verifier_service.client.errors import VerifierClientError

#: How far a delivery's timestamp may be from now (replayed or badly delayed deliveries fail).
TOLERANCE_S = 300


class WebhookVerificationError(VerifierClientError):
    """A webhook whose signature, timestamp or headers do not check out."""


def verify_webhook(
    secret: str,
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    tolerance_s: float = TOLERANCE_S,
    now: float | None = None,
) -> dict[str, Any]:
    """The delivered event (`{"id", "type", "job_id", "timestamp", "data"}`) if the headers sign
    `body` (the raw request body, unparsed) with `secret`; WebhookVerificationError if not."""
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        msg_id, stamp, signatures = (
            lower["webhook-id"], lower["webhook-timestamp"], lower["webhook-signature"],
        )  # fmt: skip
    except KeyError as exc:
        raise WebhookVerificationError(f"missing header {exc.args[0]}") from None
    try:
        timestamp = int(stamp)
        key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except (ValueError, binascii.Error) as exc:
        raise WebhookVerificationError(f"bad timestamp or secret: {exc}") from None
    if abs((time.time() if now is None else now) - timestamp) > tolerance_s:
        raise WebhookVerificationError("timestamp too far from now (replayed or delayed?)")
    raw = body.encode() if isinstance(body, str) else body
    expected = base64.b64encode(
        hmac.new(key, f"{msg_id}.{timestamp}.".encode() + raw, hashlib.sha256).digest()
    ).decode()
    for candidate in signatures.split():
        version, _, value = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            event: dict[str, Any] = json.loads(raw)
            return event
    raise WebhookVerificationError("no signature matches")
