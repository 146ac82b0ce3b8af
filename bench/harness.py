"""What the benches that run the whole service share: starting it and stopping it.

Two layouts, as the benches measure them:

- `embedded`: `verifier-service dev` (SQLite, an embedded Redis, the API and a worker per queue
  family as its children) in a temporary data directory;
- `postgres`: the API and workers as compose runs them, on a PostgreSQL database and a
  redis-server of the run's own (`backing` makes those two and the environment that points at
  them; `served` migrates, starts the workers and the API, and waits until it is ready).

And the judge benches' model server: the fault-injection stub of the OpenAI protocol
(tests/tiers/judge/judge_stub.py) as its own process, every answer after a fixed latency.

Every process runs `python -m verifier_service` from `code` (this tree, or a baseline's tree from
`bench_throughput.exported`), in a session of its own so that stopping it stops its children.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

REPO = Path(__file__).resolve().parents[1]
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
JUDGE_STUB = REPO / "tests" / "tiers" / "judge" / "judge_stub.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def service_env(data_dir: str | Path, settings: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without its VERIFIER_ settings, for a service whose data
    lives in `data_dir`, then `settings` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    env.update(VERIFIER_DATA_DIR=str(data_dir), VERIFIER_LOG_LEVEL="WARNING", OMP_NUM_THREADS="1")
    env.update(settings or {})
    return env


def _on_path(env: dict[str, str], code: Path) -> dict[str, str]:
    """`env` running the service's code from `code` (another tree, e.g. a baseline's): first on
    PYTHONPATH, and the working directory (`python -m` puts that first of all)."""
    if code == REPO:
        return env
    return env | {"PYTHONPATH": os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))}


def cli(env: dict[str, str], *args: str, code: Path = REPO) -> str:
    """A `verifier-service` command run to its end; its standard output."""
    done = subprocess.run(
        [sys.executable, "-m", "verifier_service", *args],
        env=_on_path(env, code), cwd=code, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def make_key(env: dict[str, str], name: str, *roles: str, code: Path = REPO) -> str:
    """A new API key without rate limits (`keys create`), with `roles` (trainer by default)."""
    role_args = [arg for role in roles or ("trainer",) for arg in ("--role", role)]
    made = cli(
        env, "keys", "create", *role_args, "--name", name,
        "--requests-per-min", "0", "--items-per-min", "0", code=code,
    )  # fmt: skip
    return made.splitlines()[-1]


def start(
    env: dict[str, str], *args: str, code: Path = REPO, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """A `verifier-service` command started in a session of its own; its output to `log` (or
    nowhere)."""
    out: IO[bytes] | int = log.open("ab") if log is not None else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, "-m", "verifier_service", *args],
        env=_on_path(env, code), cwd=code, stdout=out,
        stderr=subprocess.STDOUT if log is not None else subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


def wait_ready(
    url: str,
    timeout: float = 120,
    *,
    process: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> None:
    """Until `url`'s /readyz answers 200; exits the bench if it does not in `timeout` seconds
    (or `process` ends first), with the end of `log` when there is one."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or (process is not None and process.poll() is not None):
            tail = f":\n{log.read_text()[-3000:]}" if log is not None and log.exists() else ""
            raise SystemExit(f"the service at {url} did not start{tail}")
        time.sleep(0.3)


def stop(
    processes: Sequence[subprocess.Popen[bytes]], sig: int = signal.SIGTERM, timeout: float = 60
) -> None:
    """Signal every process's session, then wait for each; one still running after `timeout`
    seconds is killed."""
    for process in processes:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
    for process in processes:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@dataclass
class Layout:
    """A running service: its URL, the headers a trainer sends, the processes to watch."""

    url: str
    headers: dict[str, str]
    roots: list[subprocess.Popen[bytes]] = field(default_factory=list)
    #: The environment its processes run in (for more `cli` commands against it).
    env: dict[str, str] = field(default_factory=dict)


@contextmanager
def embedded(
    settings: dict[str, str] | None = None,
    code: Path = REPO,
    *,
    sandbox: bool = False,
    timeout: float = 120,
) -> Iterator[Layout]:
    """`verifier-service dev` on a temporary data directory (no sandbox worker unless
    `sandbox`); keyless, as dev's local admin."""
    with tempfile.TemporaryDirectory() as tmp:
        env = service_env(tmp, settings)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        flag = "--sandbox" if sandbox else "--no-sandbox"
        dev = start(env, "dev", "--port", str(port), flag, code=code)
        try:
            wait_ready(url, timeout, process=dev)
            yield Layout(url, {}, [dev], env)
        finally:
            stop([dev], signal.SIGINT)


def new_database(kind: str, prefix: str) -> tuple[str, str | None]:
    """A fresh database of `kind` ("sqlite": a file in a new temporary directory, else a
    PostgreSQL database named after `prefix`): its SQLAlchemy URL, and the PostgreSQL
    database's name for `drop_database` (None for SQLite)."""
    if kind == "sqlite":
        return f"sqlite:///{tempfile.mkdtemp()}/bench.db", None
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}", name


def drop_database(name: str) -> None:
    """Drop a PostgreSQL database `new_database` made, its connections closed first."""
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def pg_database(prefix: str) -> Iterator[str]:
    """A fresh PostgreSQL database, dropped at the end: its SQLAlchemy URL."""
    url, name = new_database("postgresql", prefix)
    try:
        yield url
    finally:
        assert name is not None
        drop_database(name)


@contextmanager
def backing(prefix: str, settings: dict[str, str] | None = None) -> Iterator[dict[str, str]]:
    """A PostgreSQL database and a redis-server of this run's own, and the environment of a
    service on them (its data in a temporary directory, a secret key of its own)."""
    with pg_database(prefix) as database_url, tempfile.TemporaryDirectory() as tmp:
        redis_port = free_port()
        redis = subprocess.Popen(
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            env = service_env(tmp)
            env.update(
                VERIFIER_DATABASE__URL=database_url,
                VERIFIER_BROKER__URL=f"redis://127.0.0.1:{redis_port}/0",
                VERIFIER_AUTH__SECRET_KEY=uuid.uuid4().hex,
            )
            env.update(settings or {})
            time.sleep(0.5)  # the redis-server's start
            yield env
        finally:
            redis.kill()
            redis.wait(timeout=10)


@contextmanager
def served(
    env: dict[str, str],
    workers: Sequence[Sequence[str]],
    *,
    code: Path = REPO,
    log: Path | None = None,
    timeout: float = 120,
    stop_timeout: float = 60,
) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """Each worker (its `worker` arguments) and the API on `env`'s (migrated) database, until
    the API is ready: its URL and the processes, stopped at the end (`stop`)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for args in workers:
            processes.append(start(env, "worker", *args, code=code, log=log))
        processes.append(start(env, "api", "--port", str(port), code=code, log=log))
        wait_ready(url, timeout, process=processes[-1], log=log)
        yield url, processes
    finally:
        stop(processes, timeout=stop_timeout)


@contextmanager
def postgres(
    worker_concurrency: int = 2,
    settings: dict[str, str] | None = None,
    code: Path = REPO,
    *,
    queues: str = "ladder,tier.fast,callbacks,review",
    prefix: str = "verifier_load",
) -> Iterator[Layout]:
    """The API and one worker of `queues` as compose runs them, on a database and a Redis of
    their own, with a trainer's key."""
    with backing(prefix, settings) as env:
        cli(env, "migrate", code=code)
        key = make_key(env, "load", code=code)
        worker = ["--queues", queues, "--concurrency", str(worker_concurrency)]
        with served(env, [worker], code=code) as (url, processes):
            yield Layout(url, {"Authorization": f"Bearer {key}"}, processes, env)


# ------------------------------------------------------------------------------ the judge stub


def stub_plan(base: str, reply: str, latency: float) -> None:
    """Set the stub's plan: every answer `reply`, after `latency` seconds (its log starts
    again)."""
    plan = {"plan": [], "default": {"content": reply, "delay_s": latency}}
    httpx.post(f"{base}/stub/plan", json=plan, timeout=5).raise_for_status()


@contextmanager
def judge_stub(reply: str, latency: float) -> Iterator[str]:
    """The judge stub as its own process, answering `reply` after `latency` seconds: its base
    URL (the OpenAI API under /v1)."""
    port = free_port()
    process = subprocess.Popen([sys.executable, str(JUDGE_STUB), str(port)], cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                stub_plan(base, reply, latency)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


def direct_calls(url: str, n: int, in_flight: int) -> float:
    """`n` chat completions of the stub at `url` (its /v1) from a bare httpx async client,
    `in_flight` at once: the seconds they took (what the service is measured against)."""
    body = {"model": "stub", "messages": [{"role": "user", "content": "x"}], "max_tokens": 512}

    async def run() -> None:
        slots = asyncio.Semaphore(in_flight)
        limits = httpx.Limits(max_connections=in_flight)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:

            async def one(i: int) -> None:
                async with slots:
                    response = await client.post(
                        f"{url}/chat/completions", json={**body, "seed": i}
                    )
                    response.raise_for_status()

            await asyncio.gather(*(one(i) for i in range(n)))

    started = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - started
