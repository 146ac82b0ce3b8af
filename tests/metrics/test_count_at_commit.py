"""The ladder's counts are taken when its transaction commits: a rolled-back transaction counts
nothing, a committed one counts once; and counting can be turned off."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest, values
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from verifier_service.metrics import record, registry
from verifier_service.settings import MetricsSettings, Settings


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Metrics of this test process in a directory of its own, put back as they were after."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # restored at teardown
    monkeypatch.setattr(values, "ValueClass", values.ValueClass)
    monkeypatch.setitem(registry._state, "dir", None)
    registry.metrics.cache_clear()
    assert registry.setup(Settings(data_dir=tmp_path))
    yield tmp_path / "metrics"
    registry.metrics.cache_clear()


def rewards(path: Path) -> float:
    text = generate_latest(registry.collect_registry(path)).decode()
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "verifier_rewards_total" and s.labels == {"policy": "p", "status": "scored"}
    )


def test_rollback_counts_nothing_and_commit_counts_once(host: Path) -> None:
    engine = create_engine("sqlite://")
    with Session(engine) as session:
        with session.begin():
            record.reward(session, "p", "scored")
            record.reward(session, "p", "scored")
            session.rollback()
        assert rewards(host) == 0
        with session.begin():
            record.reward(session, "p", "scored")
        assert rewards(host) == 1
        with session.begin():  # nothing recorded: nothing left over from before
            pass
        assert rewards(host) == 1


def test_turned_off_nothing_is_counted(host: Path, tmp_path: Path) -> None:
    assert not registry.setup(Settings(data_dir=tmp_path, metrics=MetricsSettings(enabled=False)))
    with Session(create_engine("sqlite://")) as session, session.begin():
        record.reward(session, "p", "scored")
    assert rewards(host) == 0


def test_files_of_dead_processes_go_and_live_ones_stay(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    (tmp_path / f"counter_{dead.stdout.strip()}.db").write_bytes(b"")
    (tmp_path / f"counter_{os.getpid()}.db").write_bytes(b"")
    assert registry.remove_dead_files(tmp_path) == 1
    assert [f.name for f in tmp_path.glob("*.db")] == [f"counter_{os.getpid()}.db"]
