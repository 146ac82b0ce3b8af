"""Faults under sustained GRPO-shaped load: the long form of tests/faults/.

Trainers keep sending batches (molecules, 20% of them repeated across batches, JSON tool calls,
code, and now and then tiny molecules that climb to chem.dft) and wait for their rewards, while
the run goes through one fault per phase:

- SIGKILL a worker of each queue family (fast: ladder + tier.fast + callbacks, sim, hifi with
  chem.dft on tiny molecules, sandbox with code items) while it holds work, then start it again;
- restart the run's own redis-server (no persistence: queued work is lost and must be sent again);
- restart the run's own PostgreSQL cluster (pg_createcluster; never the machine's default one);
- SIGKILL the API while trainers wait on their requests; they retry with their Idempotency-Key.

At the end every job is polled to its end and each fault (the phase a batch was submitted in)
gets: items submitted, rewards final, lost, duplicated (an item with more than one verdict of a
tier, a job whose cost-ledger rows differ from its verdicts, an Idempotency-Key that gave a
second job), 5xx answers seen (503 with Retry-After counted apart: it is the documented answer
while the database is away). Exit code 1 if anything was lost or duplicated or a 5xx other than
503 was seen.

    .venv/bin/python bench/bench_faults.py --short          # ~3 minutes: 4 trainers, 12 s a fault
    .venv/bin/python bench/bench_faults.py                  # 8 trainers, 45 s a fault
    .venv/bin/python bench/bench_faults.py --short --json faults.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from bench_load import nci
from harness import free_port
from rdkit import Chem, rdBase

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support import (
    PostgresCluster,
    RedisServer,
    Service,
    service_env,
    wait_ready,
)

TOOL_SCHEMA = {"type": "object", "required": ["tool", "args"]}
FAST_QUEUES = "ladder,tier.fast,callbacks,review"
FAMILIES = {"sim": "tier.sim", "hifi": "tier.hifi", "sandbox": "tier.sandbox"}
POLICY = {
    "name": "bench-faults",
    "ladders": {
        "molecule": [
            {"tier": "chem.fast"},
            {
                "tier": "chem.surrogate",
                "gate": "verdicts['chem.fast'].status == 'passed'"
                " && verdicts['chem.fast'].components.qed > 0.7",
                "config": {"xtb": False},
            },
        ],
        "json": [{"tier": "schema"}],
        "code": [{"tier": "code.sandbox"}],
    },
}
DFT_POLICY = {
    "name": "bench-faults-dft",
    "ladders": {
        "molecule": [
            {"tier": "chem.fast"},
            {
                "tier": "chem.dft",
                "gate": "verdicts['chem.fast'].status == 'passed'"
                " && verdicts['chem.fast'].components.heavy_atoms <= 4",
                "config": {"functional": "HF", "basis": "sto-3g", "timeout_s": 60},
            },
        ],
        "json": [{"tier": "schema"}],
    },
}


def tiny_molecules() -> list[str]:
    """Distinct molecules of at most 4 heavy atoms (chem.dft takes a second or two on each)."""
    rdBase.DisableLog("rdApp.*")
    seen: set[str] = set()
    tokens = ["C", "N", "O", "S", "F", "=C", "=O", "#N", "(C)", "(O)"]
    for n in range(1, 5):
        for parts in itertools.product(tokens, repeat=n):
            mol = Chem.MolFromSmiles("".join(parts))
            if mol is not None and 0 < mol.GetNumHeavyAtoms() <= 4:
                seen.add(Chem.MolToSmiles(mol))
    return sorted(seen)


def docker_reason() -> str | None:
    """Why the sandbox family cannot run here, or None when it can."""
    try:
        import docker
        from tiers.code.settings import SandboxSettings

        client = docker.from_env()
        client.ping()
        client.images.get(SandboxSettings().image)
    except Exception as exc:  # any failure means: no sandbox family in this run
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    return None


@dataclass
class Submission:
    phase: str
    key: str
    body: dict[str, Any]
    job_id: str | None = None
    other_ids: set[str] = field(default_factory=set)


@dataclass
class Stats:
    answers_5xx: Counter[str] = field(default_factory=Counter)  # phase -> 5xx other than 503
    answers_503: Counter[str] = field(default_factory=Counter)
    rejected: list[str] = field(default_factory=list)


class Trainers:
    """Threads that each send a batch, wait for its rewards (up to `wait_s`), and again."""

    def __init__(self, url: str, key: str, n: int, sizes: tuple[int, int], code: bool) -> None:
        self.url, self.key, self.sizes, self.code = url, key, sizes, code
        self.phase = "warm-up"
        self.submissions: list[Submission] = []
        self.stats = Stats()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._counter = itertools.count()
        rng = random.Random(16)
        pool = nci()
        rng.shuffle(pool)
        self._repeats, self._pool = pool[:240], pool[100:]
        self._tiny = tiny_molecules()
        rng.shuffle(self._tiny)
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(n)]

    def _take(self, items: list[str]) -> str:
        with self._lock:
            return items.pop() if items else random.choice(self._repeats)

    def batch(self, rng: random.Random) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        for _ in range(rng.randint(*self.sizes)):
            if rng.random() < 0.15:
                call = {"tool": rng.choice(["search", "open"]), "args": {"q": uuid.uuid4().hex}}
                items.append(
                    {"kind": "json", "payload": call, "reference": {"schema": TOOL_SCHEMA}}
                )
                continue
            smiles = rng.choice(self._repeats) if rng.random() < 0.2 else self._take(self._pool)
            items.append({"kind": "molecule", "payload": {"smiles": smiles}})
        if rng.random() < 0.3:  # a batch of the DFT policy: its tiny molecules climb to chem.dft
            tiny = [self._take(self._tiny) for _ in range(2)]
            items += [{"kind": "molecule", "payload": {"smiles": s}} for s in tiny]
            return {"policy": DFT_POLICY["name"], "items": items}
        for _ in range(rng.randint(1, 3) if self.code else 0):
            k = next(self._counter)
            answer = k + 1 if rng.random() < 0.8 else k  # some candidates are wrong
            code = f"def inc(x):\n    return x + 1  # candidate {uuid.uuid4().hex}\n"
            tests = f"assert inc({k}) == {answer}\n"
            items.append({"kind": "code", "payload": {"code": code, "tests": tests}})
        return {"policy": POLICY["name"], "items": items}

    def count(self, phase: str, status: int) -> None:
        with self._lock:
            if status == 503:
                self.stats.answers_503[phase] += 1
            elif status >= 500:
                self.stats.answers_5xx[phase] += 1

    def submit(self, client: httpx.Client, sub: Submission, wait_s: float) -> None:
        """POST until accepted, with the same Idempotency-Key, riding out 503s and a dead API."""
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                response = client.post(
                    "/v1/rewards",
                    json={**sub.body, "wait_s": wait_s},
                    headers={"Idempotency-Key": sub.key},
                )
            except httpx.TransportError:
                time.sleep(0.5)
                continue
            if response.status_code in (200, 202):
                job_id = str(response.json()["id"])
                if sub.job_id is None:
                    sub.job_id = job_id
                elif job_id != sub.job_id:
                    sub.other_ids.add(job_id)
                return
            self.count(sub.phase, response.status_code)
            if response.status_code < 500:
                self.stats.rejected.append(f"{response.status_code}: {response.text[:200]}")
                return
            time.sleep(min(float(response.headers.get("Retry-After", "1")), 2.0))
        self.stats.rejected.append(f"never accepted in 180 s ({sub.phase})")

    def _run(self, index: int) -> None:
        rng = random.Random(1000 + index)
        with httpx.Client(base_url=self.url, timeout=60, headers=self._auth()) as client:
            while not self._stop.is_set():
                sub = Submission(self.phase, uuid.uuid4().hex, self.batch(rng))
                self.submit(client, sub, wait_s=5)
                with self._lock:
                    self.submissions.append(sub)
                if sub.job_id is not None:  # a GRPO step waits for its rewards (not forever)
                    wait_job(client, sub.job_id, 30, lambda s, p=sub.phase: self.count(p, s))

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def __enter__(self) -> Trainers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=240)


def wait_job(client: httpx.Client, job_id: str, timeout: float, on_5xx: Any) -> dict[str, Any]:
    """GET the job until it completes or `timeout` runs out; {} when never seen."""
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            response = client.get(f"/v1/jobs/{job_id}")
        except httpx.TransportError:
            time.sleep(0.5)
            continue
        if response.status_code >= 500:
            on_5xx(response.status_code)
        elif response.status_code == 200:
            job = response.json()
            if job["status"] == "completed":
                return job
        time.sleep(0.3)
    return job


@dataclass
class Run:
    """The run's own PostgreSQL cluster, redis-server and service processes."""

    cluster: PostgresCluster
    broker: RedisServer
    service: Service
    families: list[str]

    def log_size(self, name: str) -> int:
        return int(self.service.logs[name].stat().st_size)

    def kill_worker_holding_work(self, name: str, queues: str, since: int, timeout: float) -> str:
        """SIGKILL the worker once its log shows a task received after `since`; start again."""
        deadline = time.monotonic() + timeout
        note = "killed idle (no task received in time)"
        while time.monotonic() < deadline:
            with self.service.logs[name].open("rb") as log:
                log.seek(since)
                if b"received" in log.read():
                    note = "killed holding a task"
                    break
            time.sleep(0.2)
        self.service.stop(name, sig=9)
        self.service.start_worker(name, queues, concurrency=2 if name == "fast" else 1)
        return note

    def restart_api(self) -> str:
        port = self.service.base_url.rsplit(":", 1)[1]
        self.service.stop("api", sig=9)
        time.sleep(1.0)
        api = self.service.start("api", "api", "--port", port)
        wait_ready(self.service.base_url, timeout=120, process=api)
        return "API SIGKILLed, back after 1 s"


def start_run(data_dir: Path, families: list[str]) -> Run:
    cluster = PostgresCluster()
    cluster.create()
    broker = RedisServer(free_port(), data_dir)
    broker.start()
    env = service_env(
        data_dir,
        VERIFIER_DATABASE__URL=cluster.url,
        VERIFIER_BROKER__URL=f"redis://127.0.0.1:{broker.port}/0",
        VERIFIER_WORKER__SWEEP_S="1",
        VERIFIER_API__OUTBOX_SWEEP_S="1",
        VERIFIER_API__OUTBOX_GRACE_S="2",
        VERIFIER_SANDBOX__POOL_SIZE="2",
    )
    port = free_port()
    service = Service(base_url=f"http://127.0.0.1:{port}", env=env, data_dir=data_dir)
    run = Run(cluster, broker, service, families)
    done = service.cli("migrate")
    if done.returncode != 0:
        raise SystemExit(f"migrate failed: {done.stderr[-2000:]}")
    service.api_key = service.create_key("bench-faults", "trainer", "operator", "admin")
    service.start_worker("fast", FAST_QUEUES, concurrency=2)
    for family in families:
        service.start_worker(family, FAMILIES[family], concurrency=1)
    api = service.start("api", "api", "--port", str(port))
    wait_ready(service.base_url, timeout=120, process=api)
    with service.client() as client:
        for document in (POLICY, DFT_POLICY):
            response = client.post("/v1/policies", json={"document": document})
            if response.status_code != 201:
                raise SystemExit(f"policy {document['name']}: {response.text}")
    return run


def stop_run(run: Run) -> None:
    run.service.stop_all()
    run.broker.stop()
    run.cluster.drop()


def check_jobs(trainers: Trainers, url: str, key: str, timeout: float) -> dict[str, Counter[str]]:
    """Poll every job to its end; per phase the counts a trainer would check."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    deadline = time.monotonic() + timeout
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, timeout=60, headers=headers) as client:
        for sub in trainers.submissions:
            c = counts[sub.phase]
            n = len(sub.body["items"])
            c["items submitted"] += n
            if sub.job_id is None:
                c["lost"] += n
                continue
            # The same key gives the same job, now that everything is back.
            trainers.submit(client, sub, wait_s=0)
            c["duplicated"] += len(sub.other_ids)
            left = max(1.0, deadline - time.monotonic())
            job = wait_job(client, sub.job_id, left, lambda s, p=sub.phase: trainers.count(p, s))
            final = 0
            verdicts = 0
            for item in job.get("items", []):
                tiers = [v["tier"] for v in item["verdicts"]]
                c["duplicated"] += len(tiers) - len(set(tiers))
                verdicts += len(tiers)
                status = (item["reward"] or {}).get("status", "none")
                if item["state"] != "done" or status in ("pending", "none"):
                    stuck = f"stuck {item['state']} after {tiers} (job {job['status']})"
                    c[stuck] += 1
                elif item["state"] == "done":
                    final += 1
                    c[f"reward {status}"] += 1
                    if status != "scored":
                        reason = str(item["reward"].get("reason"))[:240]
                        c[f"reason {status}: {reason} {tiers}"] += 1
                    for tier in tiers:
                        c[f"verdicts {tier}"] += 1
            c["rewards final"] += final
            c["lost"] += n - final
            cost = client.get(f"/v1/jobs/{sub.job_id}/cost").json()
            charged = sum(t["calls"] + t["cache_hits"] for t in cost["tiers"].values())
            c["duplicated"] += abs(charged - verdicts)
    for phase, c in counts.items():
        c["5xx seen"] = trainers.stats.answers_5xx[phase]
        c["503 seen (retried)"] = trainers.stats.answers_503[phase]
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--short", action="store_true", help="a quick run (~3 minutes)")
    parser.add_argument("--trainers", type=int, help="concurrent trainers (8; short: 4)")
    parser.add_argument("--phase-s", type=float, help="seconds of load per fault (45; short: 12)")
    parser.add_argument("--final-timeout", type=float, default=300, help="for every job to end")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    trainers_n = args.trainers or (4 if args.short else 8)
    phase_s = args.phase_s or (12.0 if args.short else 45.0)
    sizes = (16, 48) if args.short else (16, 128)
    no_docker = docker_reason()
    families = ["sim", "hifi"] + ([] if no_docker else ["sandbox"])
    if no_docker:
        print(f"sandbox family skipped (no code items): {no_docker}")
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="bench-faults-")  # kept when the run fails (its logs)
    try:
        run = start_run(Path(tmp), families)
        notes: dict[str, str] = {}
        try:
            svc = run.service
            faults: list[tuple[str, Any]] = [
                ("SIGKILL worker fast", ("fast", FAST_QUEUES)),
                *((f"SIGKILL worker {f}", (f, FAMILIES[f])) for f in families),
                ("restart Redis", None),
                ("restart PostgreSQL", None),
                ("SIGKILL API", None),
            ]
            with Trainers(svc.base_url, svc.api_key, trainers_n, sizes, not no_docker) as tr:
                time.sleep(phase_s / 2)
                for name, worker in faults:
                    tr.phase = name
                    print(f"{time.monotonic() - started:6.0f} s  {name}", flush=True)
                    sizes_at = {w: run.log_size(w) for w in ["fast", *families]}
                    time.sleep(phase_s / 3)
                    if worker is not None:
                        notes[name] = run.kill_worker_holding_work(
                            worker[0], worker[1], sizes_at[worker[0]], phase_s
                        )
                    elif name == "restart Redis":
                        run.broker.stop()
                        run.broker.start()
                        notes[name] = "redis-server SIGKILLed and started empty"
                    elif name == "restart PostgreSQL":
                        run.cluster.restart()
                        notes[name] = "pg_ctlcluster restart of the run's own cluster"
                    else:
                        notes[name] = run.restart_api()
                    time.sleep(phase_s * 2 / 3)
                tr.phase = "after the faults"
                time.sleep(phase_s / 2)
            load_s = time.monotonic() - started
            counts = check_jobs(tr, svc.base_url, svc.api_key, args.final_timeout)
            api_log = svc.log_tail("api", 10_000_000)
        finally:
            stop_run(run)
    except BaseException:
        print(f"the service's logs (api.log, fast.log, ...) are kept in {tmp}")
        raise
    columns = ["items submitted", "rewards final", "lost", "duplicated", "5xx seen"]
    print(f"\n{trainers_n} trainers, {phase_s:.0f} s per fault, load {load_s:.0f} s, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"{'phase':24}" + "".join(f"{c:>17}" for c in columns) + "  503 (retried)")
    for phase, c in counts.items():
        print(f"{phase:24}" + "".join(f"{c[k]:>17}" for k in columns)
              + f"  {c['503 seen (retried)']:>13}")  # fmt: skip
    for phase, c in counts.items():
        prefixes = ("reward ", "verdicts ", "reason ", "stuck ")
        extra = {k: v for k, v in sorted(c.items()) if k.startswith(prefixes)}
        print(f"  {phase}: {notes.get(phase, '')} {json.dumps(extra)}")
    internal = api_log.count("Internal Server Error")
    print(f"rejected requests: {len(tr.stats.rejected)} {tr.stats.rejected[:3]}")
    print(f"'Internal Server Error' in the API log: {internal}")
    total = sum((c for c in counts.values()), Counter())
    shown = [*columns, "503 seen (retried)"]
    figures = {
        "trainers": trainers_n,
        "phase_s": phase_s,
        "load_s": round(load_s, 1),
        "families_killed": ["fast", *families],
        "skipped": {"sandbox": no_docker} if no_docker else {},
        "faults": {p: {k: c[k] for k in shown} for p, c in counts.items()},
        "not_scored": {
            p: {k: v for k, v in c.items() if k.startswith(("reason ", "stuck "))}
            for p, c in counts.items()
        },
        "notes": notes,
        "total": {k: total[k] for k in shown},
        "rejected": len(tr.stats.rejected),
        "internal_server_error_in_api_log": internal,
    }
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if total["lost"] or total["duplicated"] or total["5xx seen"] or tr.stats.rejected:
        print(f"the service's logs (api.log, fast.log, ...) are kept in {tmp}")
        raise SystemExit(1)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
