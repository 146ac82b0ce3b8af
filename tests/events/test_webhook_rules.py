"""Which callback URLs the service calls by default, what a receiver's signature check refuses,
what one signed POST reports and how long a failed delivery waits (no service needed)."""

from __future__ import annotations

import base64
import json
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from verifier_service.client import WebhookVerificationError, verify_webhook
from verifier_service.events.webhooks import backoff_s, post_signed, refusal, signature
from verifier_service.settings import WebhookSettings

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/hook",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://100.64.0.1/hook",
        "http://0.0.0.0/hook",
        "http://localhost/hook",
        "http://api.localhost/hook",
        "https://user:pw@hooks.example.com/hook",
        "ftp://hooks.example.com/hook",
    ],
)
def test_default_settings_refuse_internal_addresses(url: str) -> None:
    assert refusal(url, WebhookSettings()) is not None


def test_public_hosts_pass_and_lists_decide_when_given() -> None:
    assert refusal("https://hooks.example.com/rewards", WebhookSettings()) is None
    assert refusal("http://127.0.0.1:9/x", WebhookSettings(allow_private=True)) is None
    listed = WebhookSettings(allowed_hosts=["*.corp.example", "10.1.2.0/24"])
    assert refusal("https://a.corp.example/x", listed) is None
    assert refusal("https://10.1.2.9/x", listed) is None
    assert "not in this service's allowed" in str(refusal("https://10.1.3.9/x", listed))
    assert "not in this service's allowed" in str(refusal("https://hooks.example.com/", listed))


def test_receivers_refuse_tampered_stale_or_foreign_deliveries() -> None:
    body = json.dumps({"id": 1, "type": "job.finished", "data": {}}).encode()
    now = int(time.time())
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(now),
        "webhook-signature": signature(SECRET, "msg_1", now, body),
    }
    assert verify_webhook(SECRET, headers, body)["type"] == "job.finished"
    with pytest.raises(WebhookVerificationError, match="no signature matches"):
        verify_webhook(SECRET, headers, body.replace(b"job.finished", b"job.cancelled"))
    other = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    with pytest.raises(WebhookVerificationError, match="no signature matches"):
        verify_webhook(other, headers, body)
    with pytest.raises(WebhookVerificationError, match="timestamp"):
        verify_webhook(SECRET, headers, body, now=now + 3600)
    with pytest.raises(WebhookVerificationError, match="missing header"):
        verify_webhook(SECRET, {"webhook-id": "msg_1"}, body)


class _Receiver(BaseHTTPRequestHandler):
    answer: ClassVar[int] = 204
    seen: ClassVar[list[tuple[dict[str, str], bytes]]] = []  # the fixture gives each test its own

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(self.answer)
        self.end_headers()
        if self.answer != 204:
            self.wfile.write(b"receiver is down")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    handler = type("Receiver", (_Receiver,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler
    server.shutdown()
    server.server_close()


def test_a_signed_post_verifies_at_the_receiver_and_reports_its_answer(
    receiver: tuple[str, type[_Receiver]],
) -> None:
    url, handler = receiver
    body = json.dumps({"id": 7, "type": "job.finished", "data": {}}).encode()
    assert post_signed(url, "msg_7", body, SECRET, 5.0) == (204, None)
    headers, got = handler.seen[-1]
    assert got == body
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"].startswith("verifier-service/")
    assert headers["webhook-id"] == "msg_7"
    assert verify_webhook(SECRET, headers, got)["id"] == 7

    handler.answer = 503
    assert post_signed(url, "msg_8", body, SECRET, 5.0) == (503, "HTTP 503: receiver is down")


def test_a_signed_post_nobody_answers_is_an_error_without_status() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    status, error = post_signed(f"http://127.0.0.1:{port}/hook", "msg_9", b"{}", SECRET, 2.0)
    assert status is None
    assert error is not None
    assert error.startswith("ConnectError")


def test_failed_deliveries_wait_twice_as_long_each_time_up_to_the_cap() -> None:
    waits = [backoff_s(n, 0.5, 3.0) for n in range(1, 6)]
    assert waits == [0.5, 1.0, 2.0, 3.0, 3.0]
