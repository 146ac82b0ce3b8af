"""An example partner of a pull oracle (docs/oracles.md): claim a batch, keep its lease with
heartbeats while measuring, post the results; repeat. It uses the light client
(`pip install verifier-service`: httpx and pydantic, none of the server).

    VERIFIER_ORACLE_KEY=vsk_... python oracle_partner.py --url https://verifier.example.org \
        --oracle lab --measure my_lab:measure

`--measure module:function` names your function: it gets one batch item
(`{"item_id", "kind", "payload", "reference"}`) and returns the measured values
(`{"solubility_logS": -2.1}`), or raises MeasurementFailed with what went wrong. A push partner
checks our signature with `verify_push` below before it stores a batch.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable, Mapping
from typing import Any

from verifier_service.client import (
    BatchItem,
    MeasurementFailed,
    OraclePartner,
    WebhookVerificationError,
    verify_webhook,
)

__all__ = ["MeasurementFailed", "main", "verify_push"]


def verify_push(secret: str, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether a pushed body is signed with the oracle's `whsec_` secret, recently (a web
    handler answers 401 when not, and 2xx once it has stored the batch). The signature alone:
    `OraclePartner(...).verify_signature` also parses the body into a `Batch`."""
    try:
        verify_webhook(secret, headers, body)
    except WebhookVerificationError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", required=True, help="The verifier service's URL.")
    parser.add_argument("--oracle", required=True, help="The oracle's name.")
    parser.add_argument("--measure", required=True, help="module:function that measures an item.")
    parser.add_argument("--once", action="store_true", help="Stop when no batch waits.")
    parser.add_argument("--poll-s", type=float, default=30.0, help="Wait when no batch waits.")
    args = parser.parse_args()
    module, _, name = args.measure.partition(":")
    measure: Callable[[dict[str, Any]], Mapping[str, Any]] = getattr(
        importlib.import_module(module), name
    )

    def on_item(item: BatchItem) -> Mapping[str, Any]:
        return measure(item.model_dump())  # your function sees the item as plain JSON

    key = os.environ.get("VERIFIER_ORACLE_KEY")  # unset: a local `verifier-service dev`
    with OraclePartner(args.oracle, args.url, api_key=key) as partner:
        served = partner.serve(on_item, poll_s=args.poll_s, once=args.once)
    print(f"served {served} batch(es)")


if __name__ == "__main__":
    main()
