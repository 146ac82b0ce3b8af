"""GET /metrics of a live service with two Celery worker processes: after some jobs, the
counters of every process of the host moved by exactly what the jobs did."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import Service, poll_job

from tiers.registry import get_tier

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

N_JOBS = 3


def _unique_smiles() -> str:
    """A phenol ether with a random chain of 16 C/N atoms: a molecule no other test sends."""
    bits = uuid.uuid4().int
    return "c1ccccc1OC" + "".join("CN"[(bits >> i) & 1] for i in range(16))


def scrape(service: Service) -> tuple[str, Samples]:
    with service.client() as client:
        response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return response.text, samples


def value(samples: Samples, metric: str, /, **labels: str) -> float:
    """The sum of the samples named `metric` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == metric and wanted <= ls)


def delta(after: Samples, before: Samples, metric: str, /, **labels: str) -> float:
    return value(after, metric, **labels) - value(before, metric, **labels)


def test_counters_move_by_what_the_jobs_did(two_workers: Service) -> None:
    _, before = scrape(two_workers)
    jobs = []
    with two_workers.client() as client:
        for _ in range(N_JOBS):
            first = _unique_smiles()
            # Per job: 2 distinct valid molecules, one of them twice, and one invalid SMILES.
            items = [first, _unique_smiles(), first, f"C1CC{uuid.uuid4().hex[:4].upper()}"]
            body = {
                "policy": "default",
                "deadline_s": 600,  # the job's deadline goes out as a delayed ladder.expire
                "items": [{"kind": "molecule", "payload": {"smiles": s}} for s in items],
            }
            response = client.post("/v1/rewards", json=body)
            assert response.status_code == 202, response.text
            jobs.append(response.headers["location"])
        polls_before = value(before, "verifier_http_request_duration_seconds_count",
                             route="/v1/jobs/{job_id}", method="GET", status="200")  # fmt: skip
        done = [poll_job(client, location, timeout=60) for location in jobs]
    assert all(j["status"] == "completed" for j in done), done
    polls = value(scrape(two_workers)[1], "verifier_http_request_duration_seconds_count",
                  route="/v1/jobs/{job_id}", method="GET", status="200") - polls_before  # fmt: skip

    # The task counters of the pool processes land a moment after the job is stored.
    task = {"name": "tier.chem_fast.verify", "queue": "tier.fast"}
    deadline = time.monotonic() + 20
    while True:
        text, after = scrape(two_workers)
        finished = delta(after, before, "celery_task_succeeded_total", **task)
        if finished >= N_JOBS or time.monotonic() > deadline:
            break
        time.sleep(0.3)

    # One chem.fast task per job, sent by the API, taken, run and finished by a worker.
    for name in ("sent", "received", "started", "succeeded"):
        assert delta(after, before, f"celery_task_{name}_total", **task) == N_JOBS, name
    assert delta(after, before, "celery_task_failed_total", **task) == 0
    assert delta(after, before, "celery_task_runtime_count", **task) == N_JOBS
    assert delta(after, before, "celery_task_sent_total", name="ladder.expire") == N_JOBS

    # Every item got a scored reward (the invalid SMILES a scored 0).
    assert delta(after, before, "verifier_rewards_total", policy="default", status="scored") == (
        4 * N_JOBS
    )
    assert delta(after, before, "verifier_rewards_total", status="infra_error") == 0
    # Verdicts: 2 computed passes, 1 computed failure, and the duplicate rides on its twin.
    verdicts = "verifier_verdicts_total"
    assert delta(after, before, verdicts, tier="chem.fast", status="passed", cached="false") == (
        2 * N_JOBS
    )
    assert delta(after, before, verdicts, tier="chem.fast", status="failed", cached="false") == (
        N_JOBS
    )
    assert delta(after, before, verdicts, tier="chem.fast", status="passed", cached="true") == (
        N_JOBS
    )
    assert delta(after, before, "verifier_tier_duration_seconds_count", tier="chem.fast") == (
        3 * N_JOBS
    )
    assert delta(after, before, "verifier_cache_misses_total", tier="chem.fast") == 4 * N_JOBS
    assert delta(after, before, "verifier_cache_hits_total", tier="chem.fast") == 0
    gate = {"policy": "default", "step": "0", "tier": "chem.fast", "decision": "climb"}
    assert delta(after, before, "verifier_gate_decisions_total", **gate) == 4 * N_JOBS
    units = get_tier("chem.fast").cost_class
    assert delta(after, before, "verifier_cost_units_total", tier="chem.fast") == pytest.approx(
        3 * N_JOBS * units
    )

    # HTTP latency by route template: the posts, and every poll of a job by its template.
    posts = {"method": "POST", "route": "/v1/rewards", "status": "202"}
    assert delta(after, before, "verifier_http_request_duration_seconds_count", **posts) == N_JOBS
    assert polls >= N_JOBS

    # Scrape-time gauges: both workers are up; queues are known by name.
    assert value(after, "celery_worker_up") >= 2
    assert ("celery_queue_length", frozenset({("queue_name", "tier.fast")})) in after
    assert value(after, "celery_broker_up") == 1

    # Bounded cardinality: no job id, item id or raw path anywhere.
    for job in done:
        assert job["id"] not in text
        assert all(item_id not in text for item_id in _ids(job))
    assert "/v1/jobs/" + done[0]["id"] not in text


def _ids(job: dict[str, object]) -> list[str]:
    items = job["items"]
    assert isinstance(items, list)
    return [str(v["id"]) for item in items for v in item["verdicts"]]


def test_a_second_scrape_counts_nothing_new(two_workers: Service) -> None:
    """Scraping is not counted as work: tasks and rewards stay put between two scrapes."""
    _, first = scrape(two_workers)
    time.sleep(1)
    _, second = scrape(two_workers)
    for name in ("celery_task_succeeded_total", "verifier_rewards_total",
                 "verifier_verdicts_total"):  # fmt: skip
        assert value(second, name) == value(first, name), name


def test_metrics_need_the_operator_role(two_workers: Service) -> None:
    trainer = two_workers.create_key(f"m-trainer-{uuid.uuid4().hex[:6]}", "trainer")
    operator = two_workers.create_key(f"m-operator-{uuid.uuid4().hex[:6]}", "operator")
    url = two_workers.base_url + "/metrics"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"Authorization": f"Bearer {trainer}"}).status_code == 403
    response = httpx.get(url, headers={"Authorization": f"Bearer {operator}"})
    assert response.status_code == 200
    assert "celery_task_sent_total" in response.text


def test_files_of_every_process_are_in_the_hosts_directory(two_workers: Service) -> None:
    files = list(Path(two_workers.data_dir, "metrics").glob("*.db"))
    pids = {f.stem.rsplit("_", 1)[1] for f in files}
    # The API, two worker main processes and at least two pool processes wrote counters.
    assert len(pids) >= 4, sorted(f.name for f in files)
