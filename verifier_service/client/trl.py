"""Reward functions for TRL's `GRPOTrainer(reward_funcs=[...])`, sync and async.

    reward = TRLReward(SmilesMapping(), base_url="http://127.0.0.1:8000", policy="drug-likeness")
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], ...)

Each call maps `prompts, completions, **dataset_columns` to items with the mapping, puts the
completions of one prompt into one GRPO group (`metadata.group`), scores them and returns
`list[float | None]`: None for `pending` and `infra_error`, which TRL leaves out of the group's
advantage. Reward components, the status fractions, mean verifier cost and the fidelity mix (the
share of rewards whose highest contributing tier is each tier) go to TRL's logs through its
`log_metric` hook; each completion's status and reason go to the completions table through
`log_extra`.

`num_generations=G` groups completions the way GRPOTrainer lays them out (G consecutive
completions per prompt), so prompts that are equal text (unconditional generation from one BOS
prompt) still form separate groups. `cost_ledger=True` also reads each job's cost ledger
(`GET /v1/jobs/{id}/cost`) after scoring and logs, per call: the charged cost units, the cache
hits, and the share of items that climbed past the first tier (`<name>/ledger/...`).
`deadline_s` gives each job a deadline: items a deferred tier (people, a lab) has not answered
by then get the policy's fallback reward, and their later answer is a revision (the changes
feed), so a step does not wait on a lab.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from verifier_service.client import _base
from verifier_service.client.aio import AsyncVerifierClient
from verifier_service.client.mappings import ItemMapping, group_key, message_text, with_group
from verifier_service.client.settings import ClientSettings
from verifier_service.client.sync import VerifierClient
from verifier_service.wire.jobs import JobOut
from verifier_service.wire.rewards import Reward, RewardStatus

_LEDGER = "ledger"

_TRAINER_KWARGS = frozenset(
    {"trainer_state", "log_extra", "log_metric", "completion_ids", "environments"}
)


def _rows(n: int, columns: Mapping[str, Any]) -> list[dict[str, Any]]:
    usable = {
        k: v
        for k, v in columns.items()
        if k not in _TRAINER_KWARGS and isinstance(v, Sequence) and len(v) == n
    }
    return [{k: v[i] for k, v in usable.items()} for i in range(n)]


def reward_values(rewards: Sequence[Reward]) -> list[float | None]:
    """TRL's view of rewards: the value when scored, None when pending or infra_error."""
    return [r.value if r.status == RewardStatus.scored else None for r in rewards]


def ledger_metrics(reports: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per-call figures from the cost reports (`GET /v1/jobs/{id}/cost`) of the call's jobs.

    `escalated_frac` is the share of items that climbed past their ladder's first tier: the
    escalations of the tier most items climbed to (every item that climbs higher climbed there
    first); `escalated_frac/<tier>` is each tier's own share.
    """
    items = sum(int(r["items"]) for r in reports)
    cost = sum(float(r["cost_units"]) for r in reports)
    every = sum(float(r["every_tier_cost_units"]) for r in reports)
    escalations: dict[str, int] = defaultdict(int)
    hits: dict[str, int] = defaultdict(int)
    calls: dict[str, int] = defaultdict(int)
    tier_cost: dict[str, float] = defaultdict(float)
    for report in reports:
        for tier, tc in report["tiers"].items():
            escalations[tier] += int(tc["escalations"])
            hits[tier] += int(tc["cache_hits"])
            calls[tier] += int(tc["calls"])
            tier_cost[tier] += float(tc.get("cost_units", 0.0))
    n = max(items, 1)
    out = {
        "items": float(items),
        "cost_units": cost,
        "cost_units_per_item": cost / n,
        "cost_vs_every_tier": cost / every if every else 0.0,
        "cache_hits": float(sum(hits.values())),
        "escalated_frac": max(escalations.values(), default=0) / n,
    }
    for tier in sorted(calls.keys() | hits.keys()):
        out[f"escalated_frac/{tier}"] = escalations[tier] / n
        out[f"cache_hits/{tier}"] = float(hits[tier])
        out[f"calls/{tier}"] = float(calls[tier])
        out[f"cost_units/{tier}"] = tier_cost[tier]
    return out


class _Base:
    def __init__(
        self,
        mapping: ItemMapping,
        *,
        policy: str | None,
        timeout_s: float | None,
        name: str,
        group_by_prompt: bool,
        num_generations: int | None,
        cost_ledger: bool,
        deadline_s: float | None,
    ) -> None:
        settings = ClientSettings()
        self.mapping = mapping
        self.policy = policy or settings.policy
        self.timeout_s = timeout_s if timeout_s is not None else settings.timeout_s
        self.group_by_prompt = group_by_prompt
        if num_generations is not None and num_generations < 1:
            raise ValueError(f"num_generations must be >= 1, not {num_generations}")
        self.num_generations = num_generations
        self.cost_ledger = cost_ledger
        self.deadline_s = deadline_s
        # Fidelity tiers seen so far: each call logs all of them (0.0 when absent), so TRL's
        # per-step means are shares of every call, not only of the calls where a tier showed up.
        self._fidelities: set[str] = set()
        # TRL names the reward's metrics (rewards/<name>/mean) after __name__.
        self.__name__ = name

    def items(
        self, prompts: Sequence[Any], completions: Sequence[Any], columns: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        state = columns.get("trainer_state")
        step = getattr(state, "global_step", None)
        rows = _rows(len(completions), columns)
        out = []
        for i, (prompt, completion, row) in enumerate(zip(prompts, completions, rows, strict=True)):
            prompt_text = message_text(prompt)
            item = self.mapping(prompt_text, message_text(completion), row)
            if self.group_by_prompt:
                group = group_key(prompt_text, step)
                if self.num_generations is not None:
                    group = f"{group}:{i // self.num_generations}"
                item = with_group(item, group)
            out.append(item)
        return out

    def scoring(self) -> dict[str, Any]:
        """score_jobs' arguments besides the items: the rewards are all a call needs."""
        return {
            "policy": self.policy, "timeout_s": self.timeout_s, "deadline_s": self.deadline_s,
            "verdicts": False,
        }  # fmt: skip

    def finish(
        self,
        jobs: Sequence[JobOut],
        reports: Sequence[Mapping[str, Any]] | None,
        columns: Mapping[str, Any],
    ) -> list[float | None]:
        """TRL's values for a call's scored jobs, logged with their cost `reports` (when read)."""
        rewards = _base.all_rewards(jobs, self.timeout_s)
        if reports is not None:
            self.log_ledger(reports, columns)
        return self.log(rewards, columns)

    def log_ledger(self, reports: Sequence[Mapping[str, Any]], columns: Mapping[str, Any]) -> None:
        log_metric: Callable[[str, float], None] | None = columns.get("log_metric")
        if log_metric is None:
            return
        for key, value in ledger_metrics(reports).items():
            log_metric(f"{self.__name__}/{_LEDGER}/{key}", value)

    def log(self, rewards: Sequence[Reward], columns: Mapping[str, Any]) -> list[float | None]:
        log_metric: Callable[[str, float], None] | None = columns.get("log_metric")
        log_extra: Callable[[str, list[Any]], None] | None = columns.get("log_extra")
        n = max(len(rewards), 1)
        if log_metric is not None:
            sums: dict[str, float] = defaultdict(float)
            counts: dict[str, int] = defaultdict(int)
            for reward in rewards:
                for component, value in reward.components.items():
                    sums[component] += value
                    counts[component] += 1
            for component, total in sums.items():
                log_metric(f"{self.__name__}/{component}", total / counts[component])
            for status in RewardStatus:
                frac = sum(r.status == status for r in rewards) / n
                log_metric(f"{self.__name__}/{status.value}_frac", frac)
            log_metric(f"{self.__name__}/cost_units", sum(r.cost.cost_units for r in rewards) / n)
            fidelities = [r.fidelity or "none" for r in rewards if r.status == RewardStatus.scored]
            self._fidelities.update(fidelities)
            for tier in sorted(self._fidelities):
                share = sum(f == tier for f in fidelities) / max(len(fidelities), 1)
                log_metric(f"{self.__name__}/fidelity/{tier}", share)
        if log_extra is not None:
            log_extra(f"{self.__name__}_status", [r.status.value for r in rewards])
            log_extra(f"{self.__name__}_reason", [r.reason or "" for r in rewards])
        return reward_values(rewards)


class TRLReward(_Base):
    """A synchronous TRL reward function backed by the reward service."""

    def __init__(
        self,
        mapping: ItemMapping,
        *,
        client: VerifierClient | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        policy: str | None = None,
        timeout_s: float | None = None,
        name: str = "verifier",
        group_by_prompt: bool = True,
        num_generations: int | None = None,
        cost_ledger: bool = False,
        deadline_s: float | None = None,
    ) -> None:
        super().__init__(
            mapping, policy=policy, timeout_s=timeout_s, name=name,
            group_by_prompt=group_by_prompt, num_generations=num_generations,
            cost_ledger=cost_ledger, deadline_s=deadline_s,
        )  # fmt: skip
        self.client = client or VerifierClient(base_url, api_key=api_key)

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **columns: Any
    ) -> list[float | None]:
        jobs = self.client.score_jobs(self.items(prompts, completions, columns), **self.scoring())
        reports = [self.client.job_cost(job.id) for job in jobs] if self.cost_ledger else None
        return self.finish(jobs, reports, columns)


class AsyncTRLReward(_Base):
    """An async TRL reward function: TRL runs it on its event loop, beside other async rewards."""

    def __init__(
        self,
        mapping: ItemMapping,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        principal: str | None = None,
        policy: str | None = None,
        timeout_s: float | None = None,
        name: str = "verifier",
        group_by_prompt: bool = True,
        num_generations: int | None = None,
        cost_ledger: bool = False,
        deadline_s: float | None = None,
    ) -> None:
        super().__init__(
            mapping, policy=policy, timeout_s=timeout_s, name=name,
            group_by_prompt=group_by_prompt, num_generations=num_generations,
            cost_ledger=cost_ledger, deadline_s=deadline_s,
        )  # fmt: skip
        self.base_url = base_url
        self.principal = principal
        self._api_key = api_key
        # An httpx.AsyncClient belongs to the loop it was first used on; keep one per loop.
        self._clients: dict[int, AsyncVerifierClient] = {}

    def _client(self) -> AsyncVerifierClient:
        loop = id(asyncio.get_running_loop())
        if loop not in self._clients:
            self._clients[loop] = AsyncVerifierClient(
                self.base_url, principal=self.principal, api_key=self._api_key
            )
        return self._clients[loop]

    async def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **columns: Any
    ) -> list[float | None]:
        items = self.items(prompts, completions, columns)
        client = self._client()
        jobs = await client.score_jobs(items, **self.scoring())
        reports = [await client.job_cost(job.id) for job in jobs] if self.cost_ledger else None
        return self.finish(jobs, reports, columns)
