"""Logs and command output never show a password, and exceptions render without locals."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
import structlog
from support import REPO, service_env

from verifier_service.core.logging import configure_logging, mask_secrets


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("postgresql+psycopg://svc:hunter2@db:5432/v", "postgresql+psycopg://svc:***@db:5432/v"),
        ("redis://:hunter2@cache:6379/0 and more", "redis://:***@cache:6379/0 and more"),
        ("url='amqp://u:p%40ss@h//'", "url='amqp://u:***@h//'"),
        ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
        ("redis://cache:6379/0", "redis://cache:6379/0"),
        ("at 12:30:00 user@host", "at 12:30:00 user@host"),
    ],
)
def test_mask_secrets(text: str, masked: str) -> None:
    assert mask_secrets(text) == masked


def test_exceptions_render_without_locals_or_passwords(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO")

    def fail(database_url: str) -> None:
        big_local = "x" * 100_000  # noqa: F841  (a local a locals-renderer would print)
        raise RuntimeError("lost connection")

    try:
        fail("postgresql://svc:hunter2@db/v")
    except RuntimeError:
        structlog.get_logger("test").exception("failed", url="redis://:hunter2@cache/0")
    out = capsys.readouterr().out
    assert "RuntimeError: lost connection" in out
    assert "hunter2" not in out
    assert "xxxxxxxxxx" not in out
    assert len(out) < 5000


def test_stdlib_handlers_mask_passwords(capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("verifier-test-stdlib")
    handler = logging.StreamHandler(sys.stdout)
    logger.addHandler(handler)
    try:
        configure_logging("INFO")
        try:
            raise ConnectionError("postgresql://svc:hunter2@db/v refused")
        except ConnectionError:
            logger.exception("connect to %s failed", "redis://:hunter2@cache/0")
    finally:
        logger.removeHandler(handler)
    out = capsys.readouterr().out
    assert "connect to redis://:***@cache/0 failed" in out
    assert "ConnectionError: postgresql://svc:***@db/v refused" in out
    assert "hunter2" not in out


def test_migrate_does_not_print_the_database_password(pg_url: str, tmp_path: object) -> None:
    # The machine's PostgreSQL trusts local connections: any password is accepted.
    url = pg_url.replace("postgres@", "postgres:hunter2@")
    env = service_env(tmp_path, VERIFIER_DATABASE__URL=url)  # type: ignore[arg-type]
    result = subprocess.run(
        [sys.executable, "-m", "verifier_service", "migrate", "--no-seed"],
        env=env, capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "database at head" in result.stderr
    assert "hunter2" not in result.stdout + result.stderr
