"""Several hosts on one machine: PostgreSQL + Redis, the API and two worker hosts, each in a
network namespace of its own, joined by veth pairs to a bridge in a private subnet the test
makes (and removes). Nothing reaches another host through loopback; a worker host that goes
away mid-task has its work redelivered to the other one.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
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
from rdkit import RDConfig
from support import REPO, free_port, poll_job, service_env

FAMILY = "ladder,tier.fast,callbacks,review"
HOSTS = ("db", "api", "wa", "wb")  # .2, .3, .4, .5; the test process itself is .1


def _netns_unavailable() -> str | None:
    """Why this machine cannot make network namespaces, or None when it can."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    if shutil.which("pg_createcluster") is None or shutil.which("redis-server") is None:
        return "pg_createcluster or redis-server is not installed"
    probe = f"vsprobe{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


_UNAVAILABLE = _netns_unavailable()
pytestmark = pytest.mark.skipif(_UNAVAILABLE is not None, reason=str(_UNAVAILABLE))


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr}"


def _unused_prefix() -> str:
    """A 10.x.y (/24) that no route or address of this machine uses yet."""
    taken = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    taken += subprocess.run(["ip", "-4", "addr"], capture_output=True, text=True).stdout
    while True:
        prefix = f"10.{random.randint(100, 250)}.{random.randint(1, 250)}"
        if f"{prefix}." not in taken:
            return prefix


@dataclass
class Network:
    """Namespaces on a bridge in 10.<a>.<b>.0/24; the test process (root namespace) is .1."""

    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    prefix: str = field(default_factory=_unused_prefix)
    made: list[str] = field(default_factory=list)

    def ns(self, host: str) -> str:
        return f"vs{self.tag}-{host}"

    def addr(self, host: str) -> str:
        return f"{self.prefix}.{HOSTS.index(host) + 2}"

    @property
    def switch(self) -> str:
        return self.ns("sw")

    @property
    def root_link(self) -> str:
        return f"vs{self.tag}"

    def create(self) -> None:
        # The bridge lives in a namespace of its own: the root namespace's firewall (Docker's
        # FORWARD policy) never sees the traffic between hosts.
        self._add_ns(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for host in HOSTS:
            name = self.ns(host)
            self._add_ns(name)
            _ip("-n", self.switch, "link", "add", host, "type", "veth",
                "peer", "name", "eth0", "netns", name)  # fmt: skip
            _ip("-n", self.switch, "link", "set", host, "master", "br0", "up")
            _ip("-n", name, "addr", "add", f"{self.addr(host)}/24", "dev", "eth0")
            _ip("-n", name, "link", "set", "eth0", "up")
            _ip("-n", name, "link", "set", "lo", "up")
        _ip("link", "add", self.root_link, "type", "veth",
            "peer", "name", "trainer", "netns", self.switch)  # fmt: skip
        self.made.append(self.root_link)
        _ip("-n", self.switch, "link", "set", "trainer", "master", "br0", "up")
        _ip("addr", "add", f"{self.prefix}.1/24", "dev", self.root_link)
        _ip("link", "set", self.root_link, "up")

    def _add_ns(self, name: str) -> None:
        _ip("netns", "add", name)
        self.made.append(name)

    def unplug(self, host: str) -> None:
        """Pull the host's cable: its link on the bridge goes down."""
        _ip("-n", self.switch, "link", "set", host, "down")

    def kill_all(self, host: str) -> None:
        """SIGKILL every process left in the host's namespace."""
        pids = subprocess.run(
            ["ip", "netns", "pids", self.ns(host)], capture_output=True, text=True
        ).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass

    def destroy(self) -> None:
        for name in reversed(self.made):
            if name == self.root_link:
                subprocess.run(["ip", "link", "del", name], capture_output=True)
            else:
                self.kill_all(name.removeprefix(f"vs{self.tag}-"))
                subprocess.run(["ip", "netns", "del", name], capture_output=True)


@dataclass
class Deployment:
    """The processes on the hosts and how to reach them."""

    net: Network
    tmp: Path
    env: dict[str, str]
    api_key: str = ""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://{self.net.addr('api')}:8000"

    def run(self, host: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", self.net.ns(host), sys.executable, "-m", "verifier_service",
             *args],
            env=self.env, cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    def start(self, name: str, host: str, *args: str, env: dict[str, str] | None = None) -> None:
        log = self.tmp / f"{name}.log"
        self.logs[name] = log
        self.processes[name] = subprocess.Popen(
            ["ip", "netns", "exec", self.net.ns(host), *args],
            env=env or self.env, cwd=REPO, stdout=log.open("ab"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip

    def start_worker(self, host: str) -> None:
        # No --name: the hosts share one hostname (ip netns keeps the UTS namespace), so the
        # default node name must tell them apart by itself.
        self.start(
            host, host, sys.executable, "-m", "verifier_service", "worker", "--queues", FAMILY,
            "--concurrency", "2",
        )  # fmt: skip

    def wait_for_log(self, name: str, text: str, timeout: float = 60, after: int = 0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log(name)[after:]:
                return
            process = self.processes.get(name)
            assert process is None or process.poll() is None, f"{name} exited:\n{self.tail()}"
            time.sleep(0.1)
        raise AssertionError(f"{name} did not log {text!r}:\n{self.tail()}")

    def log(self, name: str) -> str:
        return self.logs[name].read_text(errors="replace")

    def tail(self) -> str:
        return "\n".join(f"--- {n}\n{self.log(n)[-3000:]}" for n in self.logs)

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url, timeout=30,
            headers={"Authorization": f"Bearer {self.api_key}"},
        )  # fmt: skip

    def stop_all(self) -> None:
        for process in reversed(self.processes.values()):  # workers and API before Redis
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(timeout=15)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


@pytest.fixture
def network() -> Iterator[Network]:
    net = Network()
    try:
        net.create()
        yield net
    finally:
        net.destroy()


@pytest.fixture
def deployment(network: Network, tmp_path: Path) -> Iterator[Deployment]:
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[-1]
    cluster = f"mh{network.tag}"
    port = str(free_port())  # clusters share one socket directory: no two on one port
    db_addr = network.addr("db")
    deployment: Deployment | None = None
    try:
        subprocess.run(
            ["pg_createcluster", version, cluster, "--port", port, "--", "--auth=trust"],
            check=True, capture_output=True,
        )  # fmt: skip
        conf = Path("/etc/postgresql") / version / cluster
        with (conf / "postgresql.conf").open("a") as handle:
            handle.write(f"\nlisten_addresses = '{db_addr}'\n")
        with (conf / "pg_hba.conf").open("a") as handle:
            handle.write(f"host all all {network.prefix}.0/24 trust\n")
        subprocess.run(
            ["ip", "netns", "exec", network.ns("db"),
             "pg_ctlcluster", "--skip-systemctl-redirect", version, cluster, "start"],
            check=True, capture_output=True,
        )  # fmt: skip
        with psycopg.connect(
            f"host={db_addr} port={port} user=postgres dbname=postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE verifier")

        env = service_env(
            tmp_path,
            VERIFIER_DATABASE__URL=f"postgresql+psycopg://postgres@{db_addr}:{port}/verifier",
            VERIFIER_BROKER__URL=f"redis://{db_addr}:6379/0",
            VERIFIER_API__HOST=network.addr("api"),
            VERIFIER_API__PORT="8000",
            VERIFIER_WORKER__TASK_TIME_LIMIT_S="60",
            VERIFIER_WORKER__VISIBILITY_TIMEOUT_S="65",
            VERIFIER_WORKER__SWEEP_S="2",
            # One task per tier step, however large: the lost-host test needs its 1,500-item
            # batch held whole by one host when that host disappears.
            VERIFIER_WORKER__TASK_ITEMS="5000",
            # A host pulled mid-transaction keeps its row locks until PostgreSQL ends its
            # session; production's 120 s would outlast the test.
            VERIFIER_DATABASE__IDLE_IN_TRANSACTION_TIMEOUT_S="10",
        )
        deployment = Deployment(net=network, tmp=tmp_path, env=env)
        deployment.start(
            "redis", "db", "redis-server", "--bind", db_addr, "--port", "6379",
            "--save", "", "--appendonly", "no", "--dir", str(tmp_path), "--protected-mode", "no",
        )  # fmt: skip
        broker = redis.Redis(host=db_addr, port=6379)
        for _ in range(100):
            try:
                broker.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)

        migrated = deployment.run("api", "migrate")
        assert migrated.returncode == 0, migrated.stderr
        made = deployment.run(
            "api", "keys", "create", "--name", "multi-host", "--role", "trainer",
            "--role", "operator",
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        deployment.api_key = made.stdout.strip().splitlines()[-1]

        deployment.start("api", "api", sys.executable, "-m", "verifier_service", "api")
        for host in ("wa", "wb"):
            deployment.start_worker(host)
        for host in ("wa", "wb"):
            deployment.wait_for_log(host, "ready.")
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{deployment.base_url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"API not ready:\n{deployment.tail()}"
            assert deployment.processes["api"].poll() is None, deployment.tail()
            time.sleep(0.2)
        yield deployment
    finally:
        if deployment is not None:
            deployment.stop_all()
        subprocess.run(["pg_dropcluster", "--stop", version, cluster], capture_output=True)


def _molecules(n: int, offset: int = 0) -> list[dict[str, Any]]:
    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    lines = [line.split()[0] for line in path.read_text().splitlines() if line.strip()]
    return [{"kind": "molecule", "payload": {"smiles": s}} for s in lines[offset : offset + n]]


def _fast_workers(client: httpx.Client) -> int:
    """Live workers on tier.fast, as the API reads them from Redis."""
    response = client.get("/v1/tiers")
    assert response.status_code == 200, response.text
    return next(int(t["workers"]) for t in response.json() if t["name"] == "chem.fast")


def _assert_one_reward_each(job: dict[str, Any], n: int) -> None:
    assert job["status"] == "completed", str(job)[:2000]
    assert job["n_done"] == job["n_items"] == len(job["items"]) == n
    for item in job["items"]:
        assert item["state"] == "done"
        assert item["reward"]["status"] == "scored", item
        assert len(item["verdicts"]) == 1, item  # one verdict for its one ladder step


def test_worker_host_lost_mid_task_is_redelivered_to_the_other(deployment: Deployment) -> None:
    net = deployment.net
    with deployment.client() as client:
        # Both worker hosts serve the queues, and jobs sent to the API's address complete.
        deadline = time.monotonic() + 20
        while _fast_workers(client) != 2:
            assert time.monotonic() < deadline, (
                f"the API does not see both worker hosts:\n{deployment.tail()}"
            )
            time.sleep(0.5)
        jobs = []
        for i in range(4):
            response = client.post("/v1/rewards", json={"items": _molecules(50, 2000 + 50 * i)})
            assert response.status_code == 202, response.text
            jobs.append(response.headers["Location"])
        for location in jobs:
            _assert_one_reward_each(poll_job(client, location, timeout=60), 50)

        # A batch of chem.fast work that takes a few seconds; find the host that took it.
        offsets = {host: len(deployment.log(host)) for host in ("wa", "wb")}
        response = client.post("/v1/rewards", json={"items": _molecules(1500)})
        assert response.status_code == 202, response.text
        location = response.headers["Location"]
        deadline = time.monotonic() + 30
        victim = None
        while victim is None:
            for host in ("wa", "wb"):
                if "tier.chem_fast.verify" in deployment.log(host)[offsets[host] :]:
                    victim = host
            assert time.monotonic() < deadline, f"no worker took the task:\n{deployment.tail()}"
            time.sleep(0.05)
        other = "wb" if victim == "wa" else "wa"
        time.sleep(0.5)  # inside verify_batch now
        assert client.get(location).json()["status"] == "running"

        # The host disappears: its cable is pulled, then everything on it dies.
        lost_at = time.monotonic()
        net.unplug(victim)
        net.kill_all(victim)
        other_offset = len(deployment.log(other))

        job = poll_job(client, location, timeout=90)
        assert job["status"] == "completed", deployment.tail()
        redelivered_s = time.monotonic() - lost_at
        # The lost host's presence ran out: the API sees one worker host left.
        assert _fast_workers(client) == 1
    _assert_one_reward_each(job, 1500)
    assert "tier.chem_fast.verify" in deployment.log(other)[other_offset:], deployment.tail()
    assert deployment.processes[other].poll() is None
    print(f"worker host {victim} lost; its batch finished on {other} {redelivered_s:.1f} s later")
