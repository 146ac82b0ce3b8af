"""The companion trainer: TRL's real GRPOTrainer for a few steps against the live service."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import trl  # noqa: F401  # the train extra: .ci/test installs it; a missing TRL fails, not skips

from trainer.config import TrainConfig
from trainer.trainer import REWARD_KEY, VALIDITY_KEY, run

CONFIGS = Path(__file__).resolve().parents[2] / "trainer" / "configs"


def test_grpo_trainer_runs_against_the_live_service_and_resumes(
    live_service: Any, tmp_path: Path
) -> None:
    config = TrainConfig.load(CONFIGS / "cpu-smoke.yaml")
    config.service.base_url = live_service.base_url
    config.service.api_key = live_service.create_key("grpo-trainer", "trainer")
    config.output_dir = tmp_path / "run"
    started = time.monotonic()
    summary = run(config)
    assert time.monotonic() - started < 60
    rows = [json.loads(line) for line in summary.metrics.read_text().splitlines()]
    steps = [r for r in rows if REWARD_KEY in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    assert all(0.0 <= r[REWARD_KEY] <= 1.0 for r in steps)
    assert all(r["verifier/scored_frac"] == 1.0 for r in steps), (
        "every reward came from the service"
    )
    assert all(VALIDITY_KEY in r for r in steps)
    assert summary.plot.read_bytes()[:4] == b"\x89PNG"
    assert (config.output_dir / "checkpoint-2").is_dir()
    assert (summary.model_dir / "config.json").is_file()

    # A longer run in the same folder resumes: warm start and finished steps are not redone.
    config.grpo.max_steps = 4
    again = run(config)
    assert again.steps == 4
    assert (config.output_dir / "checkpoint-4").is_dir()


def test_every_shipped_config_is_valid() -> None:
    for path in CONFIGS.glob("*.yaml"):
        config = TrainConfig.load(path)
        assert config.grpo.batch_size % config.grpo.num_generations == 0, path.name
        if config.service.policy_file is not None:
            assert config.service.policy_file.is_file(), path.name
