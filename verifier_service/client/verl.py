"""verl custom reward functions backed by the reward service.

In a verl config:

    custom_reward_function:
      path: <site-packages>/verifier_service/client/verl.py
      name: compute_score          # or compute_score_batch with reward_model.reward_manager=batch
      reward_kwargs: {base_url: "http://127.0.0.1:8000", policy: drug-likeness, kind: molecule}

`kind` picks the mapping of `solution_str` to an item: `molecule` (the SMILES in the text;
`ground_truth`, when given, becomes the reference SMILES) or `code` (the fenced code block;
`ground_truth` holds the tests). Without keyword arguments, VERIFIER_CLIENT__* settings apply.

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

from verifier_service.client.mappings import CodeMapping, ItemMapping, SmilesMapping
from verifier_service.client.settings import ClientSettings
from verifier_service.client.sync import VerifierClient
from verifier_service.wire.rewards import Reward, RewardStatus


@lru_cache(maxsize=8)
def _client(base_url: str, principal: str | None, api_key: str | None) -> VerifierClient:
    return VerifierClient(base_url, principal=principal, api_key=api_key)


def _mapping(kind: str) -> ItemMapping:
    if kind == "molecule":
        return SmilesMapping(reference_column="ground_truth")
    if kind == "code":
        return CodeMapping(tests_column="ground_truth")
    raise ValueError(f"kind must be 'molecule' or 'code', not {kind!r}")


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
    """One sample's reward, in verl's `compute_score` signature (data_source is not used)."""
    del data_source  # one reward service for all sources; the policy decides
    # One sample cannot know its batch's component names, so the single form adds none.
    (out,) = compute_score_batch(
        [""], [solution_str], [ground_truth], [extra_info], **{**kw, "with_components": False}
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
    del data_sources  # one reward service for all sources; the policy decides
    rewards = client.score(
        items,
        policy=policy or settings.policy,
        timeout_s=timeout_s if timeout_s is not None else settings.timeout_s,
    )
    names = sorted({c for r in rewards for c in r.components}) if with_components else []
    return [result(r, missing_score=missing_score, components=names) for r in rewards]
