"""Structured JSON logs carry the request id bound in the context (as a task's logs do)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import structlog

from verifier_service.core.logging import configure_logging


@pytest.fixture
def json_logs() -> Iterator[None]:
    configure_logging("INFO", json=True)
    yield
    structlog.contextvars.clear_contextvars()
    configure_logging("INFO")


@pytest.mark.usefixtures("json_logs")
def test_a_json_log_line_carries_the_bound_ids(capsys: pytest.CaptureFixture[str]) -> None:
    structlog.contextvars.bind_contextvars(request_id="rid-42", job_id="job-7")
    structlog.get_logger("t").info(
        "task finished", url="redis://user:secret@host:6379/0", state="SUCCESS"
    )
    line = capsys.readouterr().out.strip().splitlines()[-1]
    event = json.loads(line)
    assert event["event"] == "task finished"
    assert event["request_id"] == "rid-42"
    assert event["job_id"] == "job-7"
    assert event["level"] == "info"
    assert "secret" not in line  # passwords stay masked in JSON too
