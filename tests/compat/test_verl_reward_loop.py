"""verl 0.9.x's reward loop calling our compute_score, as its source calls it, on the live API.

verl needs CUDA torch, Ray and vLLM, so it is not installed here. Its reward loop managers
(naive, dapo, gdpo, remote, rate_limited; there is no "batch" one) bind `reward_kwargs` to the
custom function, then call it once per sample from a thread pool with keyword arguments
(`data_source`, `solution_str` decoded with skip_special_tokens=True, `ground_truth`,
`extra_info` carrying `num_turns` and `rollout_reward_scores`), and put every key of the returned
dict into `reward_extra_info`, tabulated by key across the batch.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from verifier_service.client.verl import compute_score

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"


def test_reward_loop_calls_per_sample_and_every_sample_has_the_same_keys(
    live_service: Any,
) -> None:
    # What verl's get_custom_reward_fn hands the manager: the function with reward_kwargs bound.
    fn = functools.partial(
        compute_score,
        base_url=live_service.base_url,
        api_key=live_service.api_key,
        policy="default",
        kind="molecule",
    )
    solutions = [f"The molecule is {ASPIRIN}.", "C1CC", "no idea", "CCO"]

    async def run_single(solution: str) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(
            None,
            lambda: fn(
                data_source="chem",
                solution_str=solution,
                ground_truth=None,
                extra_info={"num_turns": None, "rollout_reward_scores": {}},
            ),
        )
        assert isinstance(result, dict)
        return {"reward_score": result["score"], "reward_extra_info": dict(result)}

    async def batch() -> list[dict[str, Any]]:
        return await asyncio.gather(*(run_single(s) for s in solutions))

    outs = asyncio.run(batch())
    keys = [set(o["reward_extra_info"]) for o in outs]
    assert keys == [keys[0]] * len(outs)
    table = {k: [o["reward_extra_info"][k] for o in outs] for k in keys[0]}
    assert all(len(column) == len(outs) for column in table.values())
    assert outs[0]["reward_score"] > 0.4
    assert [o["reward_score"] for o in outs[1:3]] == [0.0, 0.0]
    assert table["scored"] == [1.0] * 4
