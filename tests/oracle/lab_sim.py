"""A simulated lab and a simulated market: real HTTP services a test starts. Each takes pushed
batches (checking our signature with the trainer client's `verify_webhook`, as a partner would),
and after a delay posts its results back to the service under its oracle key. The lab returns
each molecule's hidden property, Crippen logP as RDKit computes it (a number no tier of the
ladder reports under that name); the market returns what a trading action made on a replayed
price series once its window closed. A partner can be down (503) for a while."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urljoin

import httpx
from rdkit import Chem
from rdkit.Chem import Crippen

from verifier_service.client import verify_webhook
from verifier_service.client.webhooks import WebhookVerificationError


def hidden_logp(smiles: str) -> float:
    """What the lab 'measures' for a molecule."""
    mol = Chem.MolFromSmiles(smiles)
    assert mol is not None, smiles
    return round(float(Crippen.MolLogP(mol)), 4)


def logp_of(item: dict[str, Any]) -> dict[str, float]:
    return {"logp": hidden_logp(item["payload"]["smiles"])}


#: The market's replayed price series (one price per tick).
PRICES = [100.0, 101.5, 99.0, 102.25, 104.0, 103.5, 98.75, 97.0, 99.5, 105.0, 106.25, 104.5]


def market_pnl(action: dict[str, Any]) -> float:
    """What a trading action made once its window closed: bought (or sold short) `qty` at tick
    `at`, closed `window` ticks later, at the replayed prices."""
    side = 1.0 if action["side"] == "buy" else -1.0
    start, end = PRICES[action["at"]], PRICES[action["at"] + action["window"]]
    return round(side * action["qty"] * (end - start), 6)


def pnl_of(item: dict[str, Any]) -> dict[str, float]:
    return {"pnl": market_pnl(item["payload"])}


def results_for(
    batch: dict[str, Any], measure: Callable[[dict[str, Any]], dict[str, float]] = logp_of
) -> list[dict[str, Any]]:
    return [{"item_id": i["item_id"], "values": measure(i)} for i in batch["items"]]


class Lab:
    """The lab's HTTP server (push mode) and its side of the protocol."""

    def __init__(
        self,
        secret: str,
        port: int = 0,
        delay_s: float = 0.3,
        measure: Callable[[dict[str, Any]], dict[str, float]] = logp_of,
    ) -> None:
        self.secret = secret
        self.delay_s = delay_s
        self.measure = measure
        self.down = False
        self.api_base = ""  # the service's URL, known once it runs
        self.api_key = ""  # the lab's oracle key
        self.batches: list[dict[str, Any]] = []  # verified and taken
        self.refused: list[tuple[int, str]] = []  # (status, why) of every refused push
        self.posted: list[httpx.Response] = []
        lab = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                status, why = lab.receive(dict(self.headers.items()), body)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(json.dumps({"status": why}).encode())

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/batches"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def receive(self, headers: dict[str, str], body: bytes) -> tuple[int, str]:
        if self.down:
            self.refused.append((503, "down"))
            return 503, "down for maintenance"
        try:
            verify_webhook(self.secret, headers, body)
        except WebhookVerificationError as exc:
            self.refused.append((401, str(exc)))
            return 401, f"signature refused: {exc}"
        batch = json.loads(body)
        if any(b["batch_id"] == batch["batch_id"] for b in self.batches):
            return 200, "already have it"  # a retry of a batch we took: deduplicated
        self.batches.append(batch)
        if not batch["items"]:
            return 202, "accepted (nothing to measure)"
        threading.Thread(target=self._measure, args=(batch,), daemon=True).start()
        return 202, "accepted"

    def _measure(self, batch: dict[str, Any]) -> None:
        time.sleep(self.delay_s)
        url = urljoin(self.api_base, batch["results_url"])
        headers = {"Authorization": f"Bearer {self.api_key}"}
        self.posted.append(
            httpx.post(
                url, json={"results": results_for(batch, self.measure)}, headers=headers, timeout=30
            )
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
