"""`keys` and `users` commands, and `api` refusing to start without auth (SQLite, no server)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, service_env


def run(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier_service", *args],
        env=env, cwd=REPO, capture_output=True, text=True, input=stdin, timeout=120,
    )  # fmt: skip


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = service_env(tmp_path)
    assert run(env, "migrate", "--no-seed").returncode == 0
    return env


def test_keys_create_list_revoke(env: dict[str, str]) -> None:
    created = run(
        env, "keys", "create", "--role", "trainer", "--name", "team-a", "--expires", "30d"
    )
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert key.startswith("vsk_")
    assert len(key) == 4 + 12 + 1 + 43
    assert "shown only now" in created.stderr
    listed = run(env, "keys", "list").stdout
    assert key[:16] in listed
    assert "team-a" in listed
    assert "active" in listed
    assert key not in listed
    assert key[17:] not in listed
    revoked = run(env, "keys", "revoke", key[:16])
    assert revoked.returncode == 0, revoked.stderr
    assert "revoked" in run(env, "keys", "list").stdout
    assert run(env, "keys", "revoke", "vsk_ffffffffffff").returncode == 2


def test_keys_create_refuses_bad_input(env: dict[str, str]) -> None:
    bad_role = run(env, "keys", "create", "--role", "king", "--name", "x")
    assert bad_role.returncode == 2
    bad_expiry = run(env, "keys", "create", "--role", "trainer", "--name", "x", "--expires", "soon")
    assert bad_expiry.returncode == 2
    assert "30d" in bad_expiry.stderr
    bad_name = run(env, "keys", "create", "--role", "trainer", "--name", "a b")
    assert bad_name.returncode == 2


def test_users_create_reads_the_password_from_stdin(env: dict[str, str]) -> None:
    made = run(env, "users", "create", "--role", "reviewer", "alice", stdin="a long passphrase\n")
    assert made.returncode == 0, made.stderr
    again = run(env, "users", "create", "--role", "reviewer", "alice", stdin="a long passphrase\n")
    assert again.returncode == 2
    assert "exists" in again.stderr
    short = run(env, "users", "create", "--role", "reviewer", "bob", stdin="short\n")
    assert short.returncode == 2
    assert "12 characters" in short.stderr


def test_api_refuses_to_start_until_auth_is_set_up(tmp_path: Path) -> None:
    env = service_env(tmp_path)
    del env["VERIFIER_AUTH__SECRET_KEY"]
    assert run(env, "migrate", "--no-seed").returncode == 0
    refused = run(env, "api", "--port", "1")
    assert refused.returncode == 2
    assert "VERIFIER_AUTH__SECRET_KEY" in refused.stderr
    assert "keys create --role admin" in refused.stderr
    env["VERIFIER_AUTH__SECRET_KEY"] = "x" * 40
    assert run(env, "keys", "create", "--role", "admin", "--name", "root").returncode == 0
    env["VERIFIER_AUTH__LOCAL_ADMIN"] = "true"
    exposed = run(env, "api", "--host", "0.0.0.0", "--port", "1")
    assert exposed.returncode == 2
    assert "LOCAL_ADMIN" in exposed.stderr
