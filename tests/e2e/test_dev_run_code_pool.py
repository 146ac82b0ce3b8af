"""`verifier-service dev` with warm `/run_code` containers (run_code_pool_size > 0): Ctrl-C
removes them, and those of a dev killed before it could are swept at the next start. Real Docker
engine, real sandbox image, the real `dev` command."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from support import REPO, Service, free_port, service_env, wait_ready

import docker
from tiers.code.engine import LABEL, OWNER_LABEL

POOL_SIZE = 3


@pytest.fixture
def engine() -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    yield client
    client.close()


def _start_dev(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = service_env(data_dir, VERIFIER_SANDBOX__RUN_CODE_POOL_SIZE=str(POOL_SIZE))
    return subprocess.Popen(
        [sys.executable, "-m", "verifier_service", "dev", "--port", str(port), "--no-sandbox"],
        env=env, stdout=(data_dir / "dev.log").open("ab"), stderr=subprocess.STDOUT, cwd=REPO,
        start_new_session=True,
    )  # fmt: skip


def _api_pid(dev: subprocess.Popen[bytes]) -> int:
    """The pid of dev's API process (a child of dev running `... api ...`)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == dev.pid and b"api" in cmd:
            return int(entry.name)
    raise AssertionError("dev has no API process")


def _containers_of(engine: docker.DockerClient, pid: int) -> list[str]:
    """Ids of the sandbox containers (running or not) labelled as made by process `pid`."""
    prefix = f"{socket.gethostname()}:{pid}:"
    found = engine.api.containers(all=True, filters={"label": LABEL})
    return [c["Id"] for c in found if c["Labels"].get(OWNER_LABEL, "").startswith(prefix)]


def _warm_pool(
    base_url: str, engine: docker.DockerClient, api_pid: int, headers: dict[str, str] | None = None
) -> list[str]:
    """Run one program through /run_code, then wait for the API's pool to be full again."""
    answer = httpx.post(
        f"{base_url}/run_code",
        json={"language": "python", "code": "print(6 * 7)"},
        headers=headers,
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["run_result"]["stdout"] == "42\n", answer.text
    deadline = time.monotonic() + 60
    while len(held := _containers_of(engine, api_pid)) < POOL_SIZE:
        assert time.monotonic() < deadline, f"the pool holds {held}"
        time.sleep(0.2)
    return held


def _stop(dev: subprocess.Popen[bytes], sig: signal.Signals) -> int:
    os.killpg(dev.pid, sig)
    try:
        return dev.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(dev.pid, signal.SIGKILL)
        raise


def test_warm_containers_are_removed_at_ctrl_c_and_swept_after_a_kill(
    tmp_path: Path, engine: docker.DockerClient
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    killed = _start_dev(tmp_path, port)
    again = None
    left: list[str] = []
    try:
        # A dev killed outright: no process of its had a chance to remove anything.
        wait_ready(url, timeout=90, process=killed)
        killed_api = _api_pid(killed)
        _warm_pool(url, engine, killed_api)
        _stop(killed, signal.SIGKILL)
        left = _containers_of(engine, killed_api)
        assert left, "the killed API left no containers: nothing to sweep"
        # The next start sweeps them (their owner is gone) ...
        again = _start_dev(tmp_path, port)
        wait_ready(url, timeout=90, process=again)
        assert _containers_of(engine, killed_api) == []
        log = (tmp_path / "dev.log").read_text()
        assert "sandbox containers left by stopped processes" in log, log[-3000:]
        # ... and Ctrl-C (SIGINT to the whole foreground group) removes its own.
        api = _api_pid(again)
        _warm_pool(url, engine, api)
    finally:
        code = _stop(again, signal.SIGINT) if again is not None else None
        for cid in left:  # only if the sweep failed: the test leaves nothing behind
            try:
                engine.api.remove_container(cid, force=True)
            except docker.errors.NotFound:
                pass
    log = (tmp_path / "dev.log").read_text()
    assert code == 0, log[-3000:]
    assert _containers_of(engine, api) == [], log[-3000:]


def test_api_stopped_with_sigterm_removes_its_warm_containers(
    live_service: Service, engine: docker.DockerClient
) -> None:
    # As compose or Kubernetes stop it. uvicorn ends by re-raising SIGTERM, so nothing registered
    # with atexit runs: the API's lifespan removes them.
    env = {**live_service.env, "VERIFIER_SANDBOX__RUN_CODE_POOL_SIZE": str(POOL_SIZE)}
    service = replace(live_service, env=env, processes={}, logs={})
    port = free_port()
    service.base_url = f"http://127.0.0.1:{port}"
    api = service.start("api-run-code-pool", "api", "--port", str(port))
    try:
        wait_ready(service.base_url, process=api)
        _warm_pool(service.base_url, engine, api.pid, live_service.auth_headers)
    finally:
        service.stop("api-run-code-pool", signal.SIGTERM)
    log = service.data_dir / "api-run-code-pool.log"
    assert api.returncode == -signal.SIGTERM, log.read_text()[-3000:]
    assert _containers_of(engine, api.pid) == [], log.read_text()[-3000:]
