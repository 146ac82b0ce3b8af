"""`verifier-service dev --auth`: keys made and printed once on first start, and required."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from support import REPO, free_port, service_env, wait_ready


def _dev(tmp_path: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = service_env(tmp_path)
    del env["VERIFIER_AUTH__SECRET_KEY"]  # dev makes and keeps its own
    return subprocess.Popen(
        [sys.executable, "-m", "verifier_service", "dev", "--port", str(port), "--no-sandbox",
         "--auth"],
        env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=REPO,
        start_new_session=True,
    )  # fmt: skip


def _stop(dev: subprocess.Popen[bytes]) -> None:
    os.killpg(dev.pid, signal.SIGINT)
    try:
        dev.wait(timeout=40)
    except subprocess.TimeoutExpired:
        os.killpg(dev.pid, signal.SIGKILL)
        raise


def test_dev_with_auth_prints_keys_once_and_requires_them(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    first = tmp_path / "first.log"
    dev = _dev(tmp_path, port, first)
    try:
        wait_ready(url, timeout=120, process=dev)
        output = first.read_text()
        trainer = re.search(r"trainer key \(trainer\):\s+(vsk_\S+)", output)
        admin = re.search(r"admin key\s+\(admin, operator, reviewer\):\s+(vsk_\S+)", output)
        assert trainer, output
        assert admin, output
        assert "AUTH OFF" not in output
        anonymous = httpx.get(f"{url}/v1/me", timeout=10)
        assert anonymous.status_code == 401
        me = httpx.get(
            f"{url}/v1/me", headers={"Authorization": f"Bearer {trainer.group(1)}"}, timeout=10
        )
        assert me.json()["roles"] == ["trainer"]
        audit = httpx.get(
            f"{url}/v1/audit", headers={"Authorization": f"Bearer {admin.group(1)}"}, timeout=10
        )
        assert audit.status_code == 200
        # The one person trying dev sees what reviewers see too (issue 35: a 403 before).
        queues = httpx.get(
            f"{url}/v1/review/queues",
            headers={"Authorization": f"Bearer {admin.group(1)}"},
            timeout=10,
        )
        assert queues.status_code == 200, queues.text
    finally:
        _stop(dev)
    # A second start prints no keys: they were shown once.
    second = tmp_path / "second.log"
    dev = _dev(tmp_path, port, second)
    try:
        wait_ready(url, timeout=120, process=dev)
        assert "vsk_" not in second.read_text()
        assert "already created" in second.read_text()
    finally:
        _stop(dev)


def test_dev_without_auth_says_so(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "dev.log"
    env = service_env(tmp_path)
    dev = subprocess.Popen(
        [sys.executable, "-m", "verifier_service", "dev", "--port", str(port), "--no-sandbox"],
        env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=REPO,
        start_new_session=True,
    )  # fmt: skip
    try:
        wait_ready(f"http://127.0.0.1:{port}", timeout=120, process=dev)
        assert "AUTH OFF" in log.read_text()
        me = httpx.get(f"http://127.0.0.1:{port}/v1/me", timeout=10).json()
        assert me == {"name": "local-admin", "roles": sorted(me["roles"]), "via": "local",
                      "on_behalf_of": None}  # fmt: skip
        assert set(me["roles"]) == {"trainer", "reviewer", "operator", "admin", "oracle"}
    finally:
        _stop(dev)
