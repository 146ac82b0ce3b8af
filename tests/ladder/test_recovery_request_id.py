"""Work the recovery sweep sends again keeps the request id of the request that caused it."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis
from support import REPO, RedisServer, free_port

from verifier_service.core.broker import make_celery
from verifier_service.core.presence import held_key
from verifier_service.ladder import recovery
from verifier_service.settings import Settings
from workers import presence


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[redis.Redis]:
    server = RedisServer(free_port(), tmp_path)
    server.start()
    try:
        yield redis.Redis(port=server.port)
    finally:
        server.stop()


def _queued_headers(client: redis.Redis, queue: str) -> list[dict[str, object]]:
    """The headers of the Celery messages waiting in `queue` (kombu's Redis transport)."""
    messages = [json.loads(raw) for raw in client.lrange(queue, 0, -1)]
    for message in messages:
        body = json.loads(base64.b64decode(message["body"]))
        assert isinstance(body, list)  # protocol 2: [args, kwargs, embed]
    return [message["headers"] for message in messages]


def test_a_dead_workers_held_task_is_sent_again_with_its_request_id(
    broker: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = broker.connection_pool.connection_kwargs["port"]
    settings = Settings.model_validate({"broker": {"url": f"redis://127.0.0.1:{port}/0"}})
    monkeypatch.setattr(presence, "get_settings", lambda: settings)
    monkeypatch.setattr(recovery, "celery_app", lambda: make_celery(settings))

    # A worker takes a task the API sent for request "step-17", then dies before finishing it.
    request = SimpleNamespace(
        id="task-1",
        name="tier.chem_fast.verify",
        args=[["item-1", "item-2"], 0],
        hostname="fast@dead-host",
        delivery_info={"routing_key": "tier.fast"},
        request_dict={"request_id": "step-17", "job_id": "job-9", "task": "ignored"},
    )
    presence._hold(request=request)
    assert broker.hexists(held_key("fast@dead-host"), "task-1")

    handled = recovery.resend_held(broker, live=set())

    assert handled == {"fast@dead-host"}
    assert not broker.exists(held_key("fast@dead-host"))
    (headers,) = _queued_headers(broker, "tier.fast")
    assert headers["task"] == "tier.chem_fast.verify"
    assert headers["request_id"] == "step-17"
    assert headers["job_id"] == "job-9"


def test_a_dead_workers_task_still_unacknowledged_goes_back_as_it_was(
    broker: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"redis://127.0.0.1:{broker.connection_pool.connection_kwargs['port']}/0"
    settings = Settings.model_validate({"broker": {"url": url}})
    monkeypatch.setattr(recovery, "celery_app", lambda: make_celery(settings))
    args = ["molecule", 0, ["item-1"]]
    sent = make_celery(settings).send_task(
        "tier.chem_fast.verify", args=args, queue="tier.fast", headers={"request_id": "step-18"}
    )
    # A worker takes it (kombu moves it into its unacknowledged set), records it, and is killed.
    take = (
        "import os\nfrom verifier_service.core.broker import celery_app\n"
        "with celery_app().connection_for_read() as c:\n"
        "    assert c.default_channel.basic_get('tier.fast', no_ack=False)\n"
        "    os._exit(0)\n"
    )
    env = {**os.environ, "VERIFIER_BROKER__URL": url}
    subprocess.run([sys.executable, "-c", take], env=env, cwd=REPO, check=True, timeout=60)
    entry = ["tier.chem_fast.verify", args, "tier.fast", {"request_id": "step-18"}]
    broker.hset(held_key("fast@killed-host"), sent.id, json.dumps(entry))
    assert broker.llen("tier.fast") == 0

    assert recovery.resend_held(broker, live=set()) == {"fast@killed-host"}

    # The same message, marked redelivered; nothing left for kombu to restore a second time.
    (headers,) = _queued_headers(broker, "tier.fast")
    assert headers["id"] == sent.id
    assert headers["redelivered"] is True
    assert headers["request_id"] == "step-18"
    assert broker.hlen("unacked") == 0


def test_tasks_held_before_ids_were_recorded_are_still_sent_again(
    broker: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = broker.connection_pool.connection_kwargs["port"]
    settings = Settings.model_validate({"broker": {"url": f"redis://127.0.0.1:{port}/0"}})
    monkeypatch.setattr(recovery, "celery_app", lambda: make_celery(settings))
    # An entry written by a worker of the previous release: name, args and queue only.
    entry = json.dumps(["tier.chem_fast.verify", [["item-1"], 0], "tier.fast"])
    broker.hset(held_key("fast@old-host"), "task-2", entry)

    assert recovery.resend_held(broker, live=set()) == {"fast@old-host"}
    (headers,) = _queued_headers(broker, "tier.fast")
    assert headers["task"] == "tier.chem_fast.verify"
    assert "request_id" not in headers
