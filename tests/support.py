"""Helpers of the tests: real service processes (API, Celery workers) and infrastructure of
their own (Redis servers, PostgreSQL clusters). Fixtures that use them are in conftest.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis

PG_ADMIN_URL = os.environ.get("TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_HOST = os.environ.get("TEST_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("TEST_REDIS_PORT", "6379"))
REPO = Path(__file__).resolve().parents[1]


def fresh_molecules(n: int) -> list[str]:
    """Molecules no earlier test has verified (alkyl chains with a random N/C pattern), so
    nothing answers them from the verdict cache the first time."""
    out = []
    for _ in range(n):
        bits = uuid.uuid4().int
        out.append("OC" + "".join("N" if bits >> i & 1 else "C" for i in range(20)) + "C")
    return out


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


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new PostgreSQL database, dropped afterwards. A service with a Redis of its own needs a
    database of its own too: a deployment is one database and one broker, and a recovery sweep
    that sees another broker's workers as dead would take over their work."""
    name = f"verifier_test_{uuid.uuid4().hex[:10]}"
    with _pg_admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with _pg_admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def private_redis_db(owner: str = "test") -> Iterator[str]:
    """A Redis database index of the local server for one service alone, flushed before and
    after: no worker of another test's service takes its tasks (e.g. its webhook deliveries)."""
    for db in range(1, 16):
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
        if client.set("verifier-test-claim", owner, nx=True, ex=3600):
            break
    else:
        raise RuntimeError("no free Redis database index for tests")
    client.flushdb()
    client.set("verifier-test-claim", owner, ex=3600)
    try:
        yield f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"
    finally:
        client.flushdb()  # the claim with it


@contextmanager
def private_backends(owner: str = "test") -> Iterator[tuple[str, str]]:
    """A deployment's own PostgreSQL database and Redis database: (database URL, broker URL)."""
    with fresh_database() as pg_url, private_redis_db(owner) as redis_url:
        yield pg_url, redis_url


class RedisServer:
    """A throwaway redis-server on a fixed port that the test can stop and start again."""

    def __init__(self, port: int, data_dir: Path) -> None:
        self.port = port
        self.data_dir = data_dir
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.data_dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port)
        for _ in range(100):
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def stop(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()


class PostgresCluster:
    """A throwaway PostgreSQL cluster (pg_createcluster) on a port of its own."""

    def __init__(self) -> None:
        self.version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[-1]
        self.name = f"fault{uuid.uuid4().hex[:8]}"
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/verifier"

    def _ctl(self, action: str) -> None:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, action],
            check=True,
            capture_output=True,
        )

    def create(self) -> None:
        subprocess.run(
            ["pg_createcluster", self.version, self.name, "--port", str(self.port),
             "--", "--auth=trust"],
            check=True, capture_output=True,
        )  # fmt: skip
        self._ctl("start")
        self.wait()
        with psycopg.connect(self._admin_dsn(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE verifier")

    def _admin_dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def wait(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                psycopg.connect(self._admin_dsn(), connect_timeout=1).close()
                return
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise AssertionError(f"cluster {self.name} did not come up")

    def restart(self) -> None:
        self._ctl("restart")

    def drop(self) -> None:
        subprocess.run(
            ["pg_dropcluster", "--stop", self.version, self.name], capture_output=True, check=False
        )


@dataclass
class Service:
    """A running set of service processes and how to reach them."""

    base_url: str
    env: dict[str, str]
    data_dir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)
    #: A key with every role (trainer, reviewer, operator, admin), made by `keys create`.
    api_key: str = ""

    @property
    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def client(self, timeout: float = 30.0, api_key: str | None = None) -> httpx.Client:
        """An HTTP client of the API, authenticated with `api_key` (default: every role)."""
        key = self.api_key if api_key is None else api_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.base_url, timeout=timeout, headers=headers)

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run `verifier-service ARGS` against this service's database."""
        return subprocess.run(
            [sys.executable, "-m", "verifier_service", *args],
            env=self.env, cwd=REPO, capture_output=True, text=True, input=stdin, timeout=120,
        )  # fmt: skip

    def create_key(self, name: str, *roles: str, **options: str) -> str:
        """A new API key through the CLI (options: expires, requests_per_min, items_per_min)."""
        args = ["keys", "create", "--name", name]
        for role in roles:
            args += ["--role", role]
        for option, value in options.items():
            args += [f"--{option.replace('_', '-')}", value]
        done = self.cli(*args)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

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
    env.update(
        {
            "VERIFIER_DATA_DIR": str(tmp),
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
            "VERIFIER_AUTH__SECRET_KEY": uuid.uuid4().hex + uuid.uuid4().hex,
        }
    )
    env.update(overrides)
    return env


def start_service(data_dir: Path, queues: str, **env_overrides: str) -> Service:
    """Migrate, make a key with every role (`service.api_key`), then start a Celery worker on
    `queues` and the API; the caller stops them."""
    port = free_port()
    env = service_env(data_dir, **env_overrides)
    service = Service(base_url=f"http://127.0.0.1:{port}", env=env, data_dir=data_dir)
    subprocess.run(
        [sys.executable, "-m", "verifier_service", "migrate"], env=env, check=True, cwd=REPO,
        capture_output=True,
    )  # fmt: skip
    service.api_key = service.create_key("test-root", "trainer", "reviewer", "operator", "admin")
    try:
        service.start_worker("worker", queues)
        api = service.start("api", "api", "--port", str(port))
        wait_ready(service.base_url, process=api)
    except AssertionError:
        logs = {name: service.log_tail(name) for name in service.logs}
        service.stop_all()
        raise AssertionError(f"service did not start: {logs}") from None
    return service


def until(
    check: Callable[[], Any], timeout: float = 30.0, what: str = "", every: float = 0.2
) -> Any:
    """`check()`'s first truthy answer, asked every `every` seconds for `timeout` seconds;
    AssertionError naming `what` when none came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what or check}")


#: The OpenAI-protocol judge stub the judge tests and benches run as a process.
JUDGE_STUB = REPO / "tests" / "tiers" / "judge" / "judge_stub.py"


@contextmanager
def judge_stub_process() -> Iterator[str]:
    """The judge stub as its own process: its base URL (the OpenAI API under /v1) once it
    answers; stopped on leaving."""
    port = free_port()
    process = subprocess.Popen([sys.executable, str(JUDGE_STUB), str(port)], cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    try:
        until(lambda: _answers(f"{url}/stub/log"), timeout=20, what="the judge stub to start",
              every=0.1)  # fmt: skip
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def _answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=1)
    except httpx.HTTPError:
        return False
    return True
