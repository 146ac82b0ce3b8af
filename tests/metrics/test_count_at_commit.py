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

from tiers.base import Verdict, VerdictStatus
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


def total(path: Path, name: str, labels: dict[str, str]) -> float:
    text = generate_latest(registry.collect_registry(path)).decode()
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and s.labels == labels
    )


def rewards(path: Path) -> float:
    return total(path, "verifier_rewards_total", {"policy": "p", "status": "scored"})


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


def test_a_batch_counts_every_verdict_and_reward_under_its_own_labels(host: Path) -> None:
    engine = create_engine("sqlite://")
    computed = Verdict(status=VerdictStatus.passed, tier="schema", tier_version="1")
    computed.cost.wall_s = 0.002
    hit = computed.model_copy(update={"cached": True})
    failed = Verdict(status=VerdictStatus.failed, tier="schema", tier_version="1")
    with Session(engine) as session, session.begin():  # a pass over a batch: summed at commit
        for _ in range(40):
            record.verdict(session, computed)
        for _ in range(25):
            record.verdict(session, hit)
        record.verdict(session, failed)
        for _ in range(66):
            record.reward(session, "p", "scored")
        record.reward(session, "p", "failed")
        record.cache_lookups(session, [("schema", True)] * 25 + [("schema", False)] * 41)
        assert rewards(host) == 0  # nothing before the commit
    verdicts = "verifier_verdicts_total"
    assert total(host, verdicts, {"tier": "schema", "status": "passed", "cached": "false"}) == 40
    assert total(host, verdicts, {"tier": "schema", "status": "passed", "cached": "true"}) == 25
    assert total(host, verdicts, {"tier": "schema", "status": "failed", "cached": "false"}) == 1
    assert rewards(host) == 66
    assert total(host, "verifier_rewards_total", {"policy": "p", "status": "failed"}) == 1
    assert total(host, "verifier_cache_hits_total", {"tier": "schema"}) == 25
    assert total(host, "verifier_cache_misses_total", {"tier": "schema"}) == 41
    # every computed verdict's time is observed on its own, the cached ones not at all
    assert total(host, "verifier_tier_duration_seconds_count", {"tier": "schema"}) == 41


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
