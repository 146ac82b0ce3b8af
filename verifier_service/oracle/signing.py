"""Signatures of pushed batches, as our webhooks sign (Standard Webhooks). A partner checks them
with the trainer client's `verify_webhook` (docs/oracles.md says how without Python)."""

from __future__ import annotations

import time

from verifier_service.events.webhooks import signature


def headers(secret: str, msg_id: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """The webhook-id, -timestamp and -signature headers of one push."""
    at = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(at),
        "webhook-signature": signature(secret, msg_id, at, body),
    }
