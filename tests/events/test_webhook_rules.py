"""Which callback URLs the service calls by default, and what a receiver's signature check
refuses (pure functions: no service needed)."""

from __future__ import annotations

import base64
import json
import secrets
import time

import pytest

from verifier_service.client import WebhookVerificationError, verify_webhook
from verifier_service.events.webhooks import refusal, signature
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
