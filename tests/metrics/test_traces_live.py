"""OpenTelemetry through real processes: with an OTLP endpoint set, one trace runs from the HTTP
request through the outbox and the broker into the Celery task and its database work. The
endpoint is a tiny OTLP/HTTP receiver of the test's own."""

from __future__ import annotations

import gzip
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # the otel extra
from support import Service, free_port, fresh_molecules, poll_job, start_service


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    attributes: frozenset[str]
    #: The attributes with text values, as (key, value).
    texts: tuple[tuple[str, str], ...] = ()


class Receiver:
    """An OTLP/HTTP (protobuf) trace receiver on a loopback port."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.add(request)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def add(self, request: object) -> None:
        found = [
            Span(
                span.trace_id.hex(),
                span.span_id.hex(),
                span.parent_span_id.hex(),
                span.name,
                frozenset(a.key for a in span.attributes),
                tuple(
                    (a.key, a.value.string_value)
                    for a in span.attributes
                    if a.value.HasField("string_value")
                ),
            )
            for resource in request.resource_spans  # type: ignore[attr-defined]
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        with self.lock:
            self.spans.extend(found)

    def trace(self, trace_id: str) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    found.thread.start()
    yield found
    found.server.shutdown()


@pytest.fixture(scope="module")
def traced(
    tmp_path_factory: pytest.TempPathFactory,
    receiver: Receiver,
    private_redis: Callable[[], AbstractContextManager[tuple[str, str]]],
) -> Iterator[Service]:
    with private_redis() as (pg_url, redis_url):
        service = start_service(
            Path(tmp_path_factory.mktemp("traced")),
            "ladder,tier.fast",
            VERIFIER_DATABASE__URL=pg_url,
            VERIFIER_BROKER__URL=redis_url,
            VERIFIER_API__INLINE_MAX_ITEMS="0",
            VERIFIER_METRICS__OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.port}",
            OTEL_BSP_SCHEDULE_DELAY="200",  # the SDK's batch delay: spans out within 0.2 s
        )
        try:
            yield service
        finally:
            service.stop_all()


def _ancestors(span: Span, by_id: dict[str, Span]) -> list[Span]:
    chain = []
    while span.parent_id and span.parent_id in by_id:
        span = by_id[span.parent_id]
        chain.append(span)
    return chain


def test_one_trace_from_the_request_to_the_workers_database_work(
    traced: Service, receiver: Receiver
) -> None:
    bits = uuid.uuid4().int
    smiles = "c1ccccc1OC" + "".join("CN"[(bits >> i) & 1] for i in range(16))
    with traced.client() as client:
        response = client.post(
            "/v1/rewards",
            json={
                "policy": "default",
                "items": [{"kind": "molecule", "payload": {"smiles": smiles}}],
            },
        )
        assert response.status_code == 202, response.text
        job = poll_job(client, response.headers["location"], timeout=60)
    assert job["status"] == "completed"

    deadline = time.monotonic() + 60
    while True:
        with receiver.lock:
            posts = [s for s in receiver.spans if s.name == "POST /v1/rewards"]
        runs = [
            s
            for post in posts
            for s in receiver.trace(post.trace_id)
            if s.name == "run/tier.chem_fast.verify"
        ]
        if runs or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert posts, "the API exported no span of the request"
    with receiver.lock:
        seen = sorted({(s.name, s.trace_id) for s in receiver.spans if s.name.startswith("run/")})
    assert runs, f"no task span in the request's trace {receiver.trace(posts[-1].trace_id)}; {seen}"
    run = runs[-1]
    # Give the worker's database spans their batch delay too.
    time.sleep(1)
    spans = receiver.trace(run.trace_id)
    by_id = {s.span_id: s for s in spans}
    post = next(s for s in spans if s.name == "POST /v1/rewards")

    # The task ran under the message the API sent after its commit, under the request.
    chain = _ancestors(run, by_id)
    assert [s.name for s in chain][:1] == ["apply_async/tier.chem_fast.verify"]
    assert post in chain

    # The outbox row was written in the request's trace, and the worker's SQL is in it too.
    sql = [s for s in spans if "db.statement" in s.attributes or "db.query.text" in s.attributes]
    assert any(post in _ancestors(s, by_id) for s in sql), [s.name for s in spans]
    assert any(run in _ancestors(s, by_id) for s in sql), [s.name for s in spans]


def _spans_named(receiver: Receiver, name: str, timeout_s: float = 60) -> list[Span]:
    deadline = time.monotonic() + timeout_s
    while True:
        with receiver.lock:
            found = [s for s in receiver.spans if s.name == name]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.3)


def test_a_batchs_rows_written_by_copy_are_in_its_trace(
    traced: Service, receiver: Receiver
) -> None:
    """40 items: the API's pass writes their rows, the worker's pass their verdicts, by COPY
    (which SQLAlchemy's instrumentation does not see); each COPY is a span of the trace."""
    items = [{"kind": "molecule", "payload": {"smiles": s}} for s in fresh_molecules(40)]
    with traced.client() as client:
        response = client.post("/v1/rewards", json={"policy": "default", "items": items})
        assert response.status_code == 202, response.text
        job = poll_job(client, response.headers["location"], timeout=60)
    assert job["status"] == "completed"
    time.sleep(1)  # the worker's spans go out in their batch delay
    posts = _spans_named(receiver, "POST /v1/rewards")
    with receiver.lock:
        copies = [s for s in receiver.spans if s.name.startswith("COPY ")]
    by_id = {s.span_id: s for s in receiver.spans}

    def copied(table: str, under: str) -> list[Span]:
        return [
            s
            for s in copies
            if dict(s.texts).get("db.statement", "").startswith(f"COPY {table} (")
            and any(a.name == under for a in _ancestors(s, by_id))
            and s.trace_id in {p.trace_id for p in posts}
        ]

    assert copied("items", "POST /v1/rewards"), [(s.name, s.texts) for s in copies]
    assert copied("verdicts", "run/tier.chem_fast.verify"), [(s.name, s.texts) for s in copies]
    span = copied("items", "POST /v1/rewards")[-1]
    assert {"db.system", "db.name", "db.operation.batch.size"} <= span.attributes
    assert dict(span.texts)["db.system"] == "postgresql"
