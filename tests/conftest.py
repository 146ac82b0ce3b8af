"""Shared fixtures: real PostgreSQL, real Redis, real API and Celery worker processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

PG_ADMIN_URL = os.environ.get("TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_HOST = os.environ.get("TEST_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("TEST_REDIS_PORT", "6379"))
REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pg_admin() -> psycopg.Connection:
    try:
        return psycopg.connect(PG_ADMIN_URL, autocommit=True)
    except psycopg.OperationalError:
        # The local cluster trusts the socket; fall back to it as the postgres user.
        return psycopg.connect(
            "dbname=postgres user=postgres host=/var/run/postgresql", autocommit=True
        )


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    name = f"verifier_test_{uuid.uuid4().hex[:10]}"
    with _pg_admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    with _pg_admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis database index of the local server reserved for this session, flushed."""
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT)
    client.ping()
    for db in range(15, 0, -1):
        # Claim a database nobody else uses: the claim key expires if the session dies.
        if redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db).set(
            "verifier-test-claim", "1", nx=True, ex=3600
        ):
            break
    else:
        raise RuntimeError("no free Redis database index for tests")
    db_client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
    db_client.flushdb()
    db_client.set("verifier-test-claim", "1", ex=3600)
    yield f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"
    db_client.flushdb()


@dataclass
class Service:
    """A running set of service processes and how to reach them."""

    base_url: str
    env: dict[str, str]
    data_dir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    def client(self, timeout: float = 30.0) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=timeout)

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = self.data_dir / f"{name}.log"
        self.logs[name] = log
        process = subprocess.Popen(
            [sys.executable, "-m", "verifier_service", *args],
            env=self.env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )
        self.processes[name] = process
        return process

    def start_worker(self, name: str, queues: str, concurrency: int = 2) -> subprocess.Popen[bytes]:
        process = self.start(
            name, "worker", "--queues", queues, "--concurrency", str(concurrency),
            "--name", f"{name}-{uuid.uuid4().hex[:6]}@%h",
        )  # fmt: skip
        self.wait_for_log(name, "ready.")
        return process

    def wait_for_log(self, name: str, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.logs[name].read_text(errors="replace"):
                return
            if self.processes[name].poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"{name} did not log {text!r}:\n{self.log_tail(name)}")

    def log_tail(self, name: str, n: int = 4000) -> str:
        return self.logs[name].read_text(errors="replace")[-n:]

    def stop(self, name: str, sig: int = 15) -> None:
        process = self.processes.pop(name)
        if process.poll() is None:
            os.killpg(process.pid, sig)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait()

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.stop(name)


def poll_job(client: httpx.Client, location: str, timeout: float) -> dict[str, Any]:
    """GET a job until it completes or `timeout` runs out; the job as last seen."""
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = client.get(location).json()
    while job["status"] != "completed" and time.monotonic() < deadline:
        time.sleep(0.2)
        job = client.get(location).json()
    return job


def wait_ready(
    base_url: str, timeout: float = 60, process: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"service exited with {process.returncode}")
        try:
            response = httpx.get(f"{base_url}/readyz", timeout=2)
            if response.status_code == 200:
                return
            last = response.text
        except httpx.HTTPError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise AssertionError(f"service at {base_url} not ready: {last}")


def service_env(tmp: Path, **overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    env.update({"VERIFIER_DATA_DIR": str(tmp), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    env.update(overrides)
    return env


def start_service(data_dir: Path, queues: str, **env_overrides: str) -> Service:
    """Migrate, then start a Celery worker on `queues` and the API; the caller stops them."""
    port = free_port()
    env = service_env(data_dir, **env_overrides)
    service = Service(base_url=f"http://127.0.0.1:{port}", env=env, data_dir=data_dir)
    subprocess.run(
        [sys.executable, "-m", "verifier_service", "migrate"], env=env, check=True, cwd=REPO,
        capture_output=True,
    )  # fmt: skip
    try:
        service.start_worker("worker", queues)
        api = service.start("api", "api", "--port", str(port))
        wait_ready(service.base_url, process=api)
    except AssertionError:
        logs = {name: service.log_tail(name) for name in service.logs}
        service.stop_all()
        raise AssertionError(f"service did not start: {logs}") from None
    return service


@pytest.fixture(scope="session")
def live_service(
    tmp_path_factory: pytest.TempPathFactory, pg_url: str, redis_url: str
) -> Iterator[Service]:
    """The API (uvicorn) and a Celery worker for the fast queues, on PostgreSQL and Redis."""
    service = start_service(
        tmp_path_factory.mktemp("live"),
        "ladder,tier.fast,callbacks,review",
        VERIFIER_DATABASE__URL=pg_url,
        VERIFIER_BROKER__URL=redis_url,
        VERIFIER_WORKER__VISIBILITY_TIMEOUT_S="8",
        VERIFIER_API__MAX_BODY_BYTES="1000000",
        VERIFIER_API__MAX_ITEMS="2000",
    )
    yield service
    service.stop_all()
