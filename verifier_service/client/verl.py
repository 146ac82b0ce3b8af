"""verl custom reward functions backed by the reward service.

In a verl config:

    custom_reward_function:
      path: <site-packages>/verifier_service/client/verl.py
      name: compute_score          # or compute_score_batch with reward_model.reward_manager=batch
      reward_kwargs: {base_url: "http://127.0.0.1:8000", policy: drug-likeness, kind: molecule}

`kind` picks the mapping of `solution_str` to an item: `molecule` (the SMILES in the text;
`ground_truth`, when given, becomes the reference SMILES), `code` (the fenced code block;
`ground_truth` holds the tests) or `text` (the whole solution; `ground_truth` is the reference
answer). Without keyword arguments, VERIFIER_CLIENT__* settings apply.

With `kind: text` and no `policy`, each sample goes to the shipped policy of its `data_source`,
as verl's own default_compute_score routes them (`DATA_SOURCE_POLICIES`: GSM8K to `gsm8k`;
MATH, MATH-500, DAPO-Math, AIME and the NuminaMath sources to `math`); other sources take the
settings' policy.

Each result is a dict: `score` plus extras that verl logs: `scored`, `pending`, `infra_error`
(0.0 or 1.0) and the reward's components. verl needs a number for every sample, so a pending or
infra_error reward scores `missing_score` (default 0.0) and says so in its `pending` or
`infra_error` extra: filter or mask those samples on that flag rather than learn from the 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from verifier_service.client.mappings import CodeMapping, ItemMapping, SmilesMapping, TextMapping
from verifier_service.client.settings import ClientSettings
from verifier_service.client.sync import VerifierClient
from verifier_service.wire.rewards import Reward, RewardStatus


@lru_cache(maxsize=8)
def _client(base_url: str, principal: str | None, api_key: str | None) -> VerifierClient:
    return VerifierClient(base_url, principal=principal, api_key=api_key)


#: verl's data sources -> the shipped policy that scores them (kind `text`, no `policy` given).
DATA_SOURCE_POLICIES: dict[str, str] = {
    "openai/gsm8k": "gsm8k",
    "gsm8k": "gsm8k",
    "lighteval/MATH": "math",
    "DigitalLearningGmbH/MATH-lighteval": "math",
    "HuggingFaceH4/MATH-500": "math",
    "math_dapo": "math",
    "math_dapo_reasoning": "math",
    "math": "math",
    "numina_aops_forum": "math",
    "numina_synthetic_math": "math",
    "numina_amc_aime": "math",
    "numina_synthetic_amc": "math",
    "numina_cn_k12": "math",
    "numina_olympiads": "math",
}


def policy_for(data_source: str, default: str) -> str:
    """The policy of a verl data source (`aime*` too), else `default`."""
    if data_source in DATA_SOURCE_POLICIES:
        return DATA_SOURCE_POLICIES[data_source]
    return "math" if data_source.startswith("aime") else default


def _mapping(kind: str) -> ItemMapping:
    if kind == "molecule":
        return SmilesMapping(reference_column="ground_truth")
    if kind == "code":
        return CodeMapping(tests_column="ground_truth")
    if kind == "text":
        return TextMapping(reference_column="ground_truth")
    raise ValueError(f"kind must be 'molecule', 'code' or 'text', not {kind!r}")


def _item(
    mapping: ItemMapping, solution: str, ground_truth: Any, extra_info: Mapping[str, Any] | None
) -> dict[str, Any]:
    row = {**(extra_info or {}), "ground_truth": ground_truth}
    prompt = str(row.get("prompt") or "")
    return mapping(prompt, solution, row)


def result(
    reward: Reward, *, missing_score: float = 0.0, components: Sequence[str] = ()
) -> dict[str, Any]:
    """verl's view of one reward: `score` and flat numeric extras.

    `components` names the component keys to add (missing ones are NaN), the same for every sample
    of a batch: verl's reward managers tabulate extras by key. The single form adds none.
    """
    scored = reward.status == RewardStatus.scored and reward.value is not None
    out: dict[str, Any] = {
        "score": float(reward.value) if scored and reward.value is not None else missing_score,
        "scored": float(scored),
        "pending": float(reward.status == RewardStatus.pending),
        "infra_error": float(reward.status == RewardStatus.infra_error),
    }
    for name in components:
        out[name] = float(reward.components.get(name, math.nan))
    return out


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """One sample's reward, in verl's `compute_score` signature (`data_source` picks the policy
    only for `kind: text` without a `policy`)."""
    # One sample cannot know its batch's component names, so the single form adds none.
    (out,) = compute_score_batch(
        [data_source],
        [solution_str],
        [ground_truth],
        [extra_info],
        **{**kw, "with_components": False},
    )
    return out


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    principal: str | None = None,
    policy: str | None = None,
    kind: str = "molecule",
    timeout_s: float | None = None,
    missing_score: float = 0.0,
    with_components: bool = True,
    client: VerifierClient | None = None,
    **_: Any,
) -> list[dict[str, Any]]:
    """A batch of rewards in one request, for verl's BatchRewardManager.

    With `with_components`, every result carries the union of the batch's component names.
    """
    settings = ClientSettings()
    client = client or _client(
        base_url or settings.base_url, principal or settings.principal, api_key
    )
    mapping = _mapping(kind)
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    items = [
        _item(mapping, solution, truth, info)
        for solution, truth, info in zip(solution_strs, ground_truths, infos, strict=True)
    ]
    timeout = timeout_s if timeout_s is not None else settings.timeout_s
    if policy or kind != "text":
        rewards = client.score(items, policy=policy or settings.policy, timeout_s=timeout)
    else:  # each data source to its policy: one request per policy, answers back in order
        sources = list(data_sources) if data_sources else [""] * len(items)
        chosen = [policy_for(str(s or ""), settings.policy) for s in sources]
        slots: list[Reward | None] = [None] * len(items)
        for name in dict.fromkeys(chosen):
            where = [i for i, p in enumerate(chosen) if p == name]
            scored = client.score([items[i] for i in where], policy=name, timeout_s=timeout)
            for i, reward in zip(where, scored, strict=True):
                slots[i] = reward
        rewards = [r for r in slots if r is not None]
    names = sorted({c for r in rewards for c in r.components}) if with_components else []
    return [result(r, missing_score=missing_score, components=names) for r in rewards]
