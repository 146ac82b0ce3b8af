"""The trainer on a text task: a tiny GPT-2 answers sums in \\boxed{}, TRL's GRPOTrainer takes
each step's rewards from the service's `answer` tier (POST /v1/rewards, policy `arithmetic`),
and every step's JSONL row shows them (docs/grpo-text-run.md has the long run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trl  # noqa: F401  # the train extra: .ci/test installs it; a missing TRL fails, not skips

from trainer.config import TrainConfig
from trainer.trainer import ACCURACY_KEY, EVAL_ACCURACY_KEY, REWARD_KEY, run
from verifier_service.client import VerifierClient

CONFIGS = Path(__file__).resolve().parents[2] / "trainer" / "configs"


def test_grpo_rewards_come_from_the_answer_tier_each_step(
    live_service: Any, tmp_path: Path
) -> None:
    config = TrainConfig.load(CONFIGS / "cpu-arithmetic.yaml")
    config.service.base_url = live_service.base_url
    # The policy is stored by an operator; the trainer's own key only asks for rewards.
    assert config.service.policy_file is not None
    with VerifierClient(live_service.base_url, api_key=live_service.api_key) as operator:
        operator.create_policy(config.service.policy_file.read_text())
    config.service.policy_file = None
    config.service.api_key = live_service.create_key("grpo-arithmetic", "trainer")
    config.output_dir = tmp_path / "run"
    # One-digit sums and a short warm start: some answers right, some wrong, in seconds.
    config.arithmetic = config.arithmetic.model_copy(
        update={"digits": 1, "warm_questions": 600, "eval_questions": 40}
    )
    config.warm_start.epochs = 20
    config.warm_start.learning_rate = 5e-3
    config.grpo.temperature = 0.5
    config.grpo.max_steps = 3
    config.grpo.batch_size = 16
    config.grpo.save_steps = 10
    summary = run(config)

    rows = [json.loads(line) for line in summary.metrics.read_text().splitlines()]
    steps = [r for r in rows if REWARD_KEY in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    for row in steps:
        # Every completion scored by the service (none pending, none an infra error), each one
        # by the answer tier: the highest rung of the policy's ladder, so its fidelity.
        assert row["verifier/scored_frac"] == 1.0, row
        assert row["verifier/fidelity/answer"] == 1.0, row
        # The policy's reward components reached the trainer: answer's `correct` and format's
        # `length`, and the reward is their product, so never above either mean.
        assert 0.0 <= row[REWARD_KEY] <= min(row["verifier/correct"], row["verifier/length"])
        # The trainer's own check (exactly \boxed{<sum>}, 12 characters at most) implies a
        # reward of 1 from the service: the service's mean is at least the check's.
        assert row[REWARD_KEY] >= row[ACCURACY_KEY] - 1e-9, row
    # The warm-started policy is right on some sums and wrong on others, so the rewards vary.
    assert any(0.0 < r[REWARD_KEY] < 1.0 for r in steps), [r[REWARD_KEY] for r in steps]
    # Held-out sums answered before and after GRPO, at steps 0 and 3.
    evals = [(r["step"], r[EVAL_ACCURACY_KEY]) for r in rows if EVAL_ACCURACY_KEY in r]
    assert [step for step, _ in evals] == [0, 3]
    assert summary.warm_validity == evals[0][1]
    assert summary.plot.read_bytes()[:4] == b"\x89PNG"
