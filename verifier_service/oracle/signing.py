"""Signatures of pushed batches, as our webhooks sign (Standard Webhooks): what the service
sends, and what a partner checks (docs/oracles.md says it for partners without Python)."""

from __future__ import annotations

import hmac
import time
from collections.abc import Mapping

from verifier_service.events.webhooks import signature

#: A partner refuses a batch whose timestamp is further than this from its clock.
TOLERANCE_S = 300


class SignatureError(ValueError):
    """A pushed batch whose signature does not verify (forged, altered, or too old)."""


def headers(secret: str, msg_id: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """The webhook-id, -timestamp and -signature headers of one push."""
    at = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(at),
        "webhook-signature": signature(secret, msg_id, at, body),
    }


def verify(secret: str, received: Mapping[str, str], body: bytes, now: float | None = None) -> str:
    """Check a push's signature headers against `secret`; its message id (the batch id).
    Raises SignatureError naming what is wrong."""
    msg_id = received.get("webhook-id")
    stamp = received.get("webhook-timestamp")
    given = received.get("webhook-signature")
    if not msg_id or not stamp or not given:
        raise SignatureError("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        at = int(stamp)
    except ValueError:
        raise SignatureError("webhook-timestamp is not an integer") from None
    if abs((time.time() if now is None else now) - at) > TOLERANCE_S:
        raise SignatureError("webhook-timestamp is too far from now")
    expected = signature(secret, msg_id, at, body)
    # The header may carry several space-separated signatures (a key being rotated).
    if not any(hmac.compare_digest(expected, part) for part in given.split()):
        raise SignatureError("no signature matches")
    return msg_id
