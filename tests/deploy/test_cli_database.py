"""The data commands (`users`, `keys`, `policies`) find the service's database or say where they
looked: run from another folder than `dev`'s, they used to leave an empty SQLite file behind
and end in a stack trace (issue 35, newcomer path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).with_name("verifier-service"))


def _cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    return subprocess.run(
        [CLI, *args], cwd=cwd, env={**clean, **env}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def test_a_data_command_in_a_folder_without_data_says_where_it_looked(tmp_path: Path) -> None:
    for args in (["policies", "list"], ["keys", "list"], ["users", "set-password", "alice"]):
        run = _cli(tmp_path, *args)
        assert run.returncode == 2, run
        assert f"no database at {tmp_path / 'data' / 'verifier.db'}" in run.stderr
        assert "VERIFIER_DATA_DIR" in run.stderr
        assert "Traceback" not in run.stderr
    assert list(tmp_path.iterdir()) == []  # nothing made by accident


def test_after_migrate_the_same_command_works(tmp_path: Path) -> None:
    assert _cli(tmp_path, "migrate").returncode == 0
    listed = _cli(tmp_path, "policies", "list")
    assert listed.returncode == 0, listed.stderr
    assert "tool-call-audit" in listed.stdout
    # And from elsewhere, pointed at that data.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    pointed = _cli(elsewhere, "policies", "list", VERIFIER_DATA_DIR=str(tmp_path / "data"))
    assert pointed.stdout == listed.stdout


def test_an_empty_or_unreachable_database_is_one_line_not_a_trace(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "verifier.db").touch()
    empty = _cli(tmp_path, "keys", "list")
    assert empty.returncode == 2
    assert "has no schema" in empty.stderr
    assert "verifier-service migrate" in empty.stderr
    url = "postgresql+psycopg://someone:hunter2hunter2@127.0.0.1:1/nowhere"
    down = _cli(tmp_path, "policies", "list", VERIFIER_DATABASE__URL=url)
    assert down.returncode == 2
    assert "cannot open the database" in down.stderr
    assert "hunter2" not in down.stderr
    assert "Traceback" not in down.stderr
