"""An example partner of a pull oracle (docs/oracles.md): claim a batch, keep its lease with
heartbeats while measuring, post the results; repeat. It needs only httpx.

    VERIFIER_ORACLE_KEY=vsk_... python oracle_partner.py --url https://verifier.example.org \
        --oracle lab --measure my_lab:measure

`--measure module:function` names your function: it gets one batch item
(`{"item_id", "kind", "payload", "reference"}`) and returns the measured values
(`{"solubility_logS": -2.1}`), or raises MeasurementFailed with what went wrong. A push partner
checks our signature with `verify_push` below before it stores a batch.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import importlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import httpx

Measure = Callable[[dict[str, Any]], dict[str, float]]


class MeasurementFailed(Exception):
    """The item could not be measured; the message goes back as the result's error."""


def verify_push(
    secret: str, headers: Mapping[str, str], body: bytes, tolerance_s: int = 300
) -> bool:
    """Whether a pushed batch is signed with the oracle's `whsec_` secret (Standard Webhooks)."""
    lower = {k.lower(): v for k, v in headers.items()}
    msg_id, stamp = lower.get("webhook-id", ""), lower.get("webhook-timestamp", "")
    if not msg_id or not stamp.isdigit() or abs(time.time() - int(stamp)) > tolerance_s:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    expected = "v1," + base64.b64encode(digest).decode()
    return any(hmac.compare_digest(expected, s) for s in lower.get("webhook-signature", "").split())


def _keep_lease(
    client: httpx.Client, path: str, lease_id: str, every_s: float, done: threading.Event
) -> None:
    while not done.wait(every_s):
        answer = client.post(path, json={"lease_id": lease_id})
        if answer.status_code == 409:  # lost: another client has the batch now
            return


def serve_one(client: httpx.Client, oracle: str, measure: Measure) -> bool:
    """Claim one batch, measure it under a kept lease, post its results; False: none waited."""
    answer = client.post(f"/v1/oracles/{oracle}/claim")
    answer.raise_for_status()
    if answer.status_code == 204:
        return False
    claim = answer.json()
    batch = claim["batch"]
    expires = datetime.fromisoformat(claim["lease_expires_at"].replace("Z", "+00:00"))
    lease_s = max(0.6, (expires - datetime.now(UTC)).total_seconds())
    done = threading.Event()
    beat = f"/v1/oracles/{oracle}/batches/{batch['batch_id']}/heartbeat"
    keeper = threading.Thread(
        target=_keep_lease, args=(client, beat, claim["lease_id"], lease_s / 3, done), daemon=True
    )
    keeper.start()
    results = []
    try:
        for item in batch["items"]:
            try:
                results.append({"item_id": item["item_id"], "values": measure(item)})
            except MeasurementFailed as exc:
                results.append({"item_id": item["item_id"], "error": str(exc) or "failed"})
    finally:
        done.set()
    if results:  # posting again after a lost answer is safe: results are idempotent
        client.post(batch["results_url"], json={"results": results}).raise_for_status()
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="The verifier service's URL.")
    parser.add_argument("--oracle", required=True, help="The oracle's name.")
    parser.add_argument("--measure", required=True, help="module:function that measures an item.")
    parser.add_argument("--once", action="store_true", help="Stop when no batch waits.")
    parser.add_argument("--poll-s", type=float, default=30.0, help="Wait when no batch waits.")
    args = parser.parse_args()
    module, _, name = args.measure.partition(":")
    measure: Measure = getattr(importlib.import_module(module), name)
    headers = {"Authorization": f"Bearer {os.environ['VERIFIER_ORACLE_KEY']}"}
    with httpx.Client(base_url=args.url, headers=headers, timeout=60) as client:
        while True:
            if serve_one(client, args.oracle, measure):
                continue
            if args.once:
                return
            time.sleep(args.poll_s)


if __name__ == "__main__":
    main()
