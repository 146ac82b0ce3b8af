"""TRL reward functions for reasoning RL: accuracy (`math`) and the R1 format (`r1-format`),
called the way GRPOTrainer calls them (conversation completions, the dataset's `solution`
column), against the live service."""

from __future__ import annotations

from typing import Any

from verifier_service.client.mappings import TextMapping
from verifier_service.client.trl import TRLReward

RIGHT = "<think>3 parts of 4 is 3/4.</think><answer>\\boxed{\\frac{3}{4}}</answer>"
WRONG_SHAPE = "It is \\boxed{0.75}, surely."
WRONG_ANSWER = "<think>3/4 is 0.7?</think><answer>\\boxed{0.7}</answer>"


def _call(reward: TRLReward, texts: list[str]) -> list[float | None]:
    prompts = [[{"role": "user", "content": "What is 3/4 as a decimal?"}]] * len(texts)
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    return reward(prompts=prompts, completions=completions, solution=["0.75"] * len(texts))


def test_accuracy_and_format_rewards(live_service: Any) -> None:
    key = {"base_url": live_service.base_url, "api_key": live_service.api_key}
    accuracy = TRLReward(TextMapping("solution"), policy="math", name="accuracy", **key)
    shape = TRLReward(TextMapping(), policy="r1-format", name="format", **key)
    texts = [RIGHT, WRONG_SHAPE, WRONG_ANSWER]
    assert _call(accuracy, texts) == [1.0, 1.0, 0.0]
    assert _call(shape, texts) == [1.0, 0.0, 1.0]
