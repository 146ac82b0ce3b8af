"""OpenRLHF's remote reward model protocol, on top of the reward API.

OpenRLHF (`--remote_rm_url http://host:8000/v1/compat/openrlhf?policy=NAME`) posts
`{"query": [...], "prompts": [...], "labels": [...]}` and reads
`{"rewards": [...], "scores": [...], "extra_logs": {...}}`.

Mapping: each query is the prompt followed by the model's response; the response is the query
with its prompt removed from the front (the whole query when no prompt matches). With
`kind=molecule` the response's SMILES (first parsable one) is scored and the label, if any, is the
reference SMILES; with `kind=code` the response's fenced code block is run against the label as
its tests. Responses to the same prompt form one GRPO group. OpenRLHF needs a number for every
sample: pending and infra_error rewards score `missing_reward` and are flagged in `extra_logs`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query
from pydantic import BaseModel, Field, ValidationError

from verifier_service.client.mappings import (
    CodeMapping,
    ItemMapping,
    SmilesMapping,
    group_key,
    with_group,
)
from verifier_service.core.deps import PRINTABLE, CurrentPrincipal, SettingsDep, WaiterDep
from verifier_service.core.errors import InvalidRequestError, PayloadTooLargeError
from verifier_service.jobs.endpoints import submit_and_wait
from verifier_service.jobs.schemas import JobOut, RewardRequest, RewardStatus

router = APIRouter(tags=["compat"])

MAPPINGS: dict[str, ItemMapping] = {
    "molecule": SmilesMapping(reference_column="label"),
    "code": CodeMapping(tests_column="label"),
}


class OpenRLHFRequest(BaseModel):
    """OpenRLHF's remote reward request: full texts, and optionally their prompts and labels."""

    query: list[str] = Field(min_length=1, description="Prompt + response texts.")
    prompts: list[str] | None = Field(default=None, description="The prompt of each query.")
    labels: list[Any] | None = Field(default=None, description="Reference or tests per query.")


class OpenRLHFResponse(BaseModel):
    """OpenRLHF's remote reward answer."""

    rewards: list[float] = Field(description="Reward per query, for the advantage.")
    scores: list[float] = Field(description="Score per query, for dynamic filtering.")
    extra_logs: dict[str, list[float]] = Field(
        description="Per-query numbers OpenRLHF logs: scored/pending/infra_error flags and "
        "the reward's components (0.0 where an item has none, e.g. an invalid molecule)."
    )


def response_text(query: str, prompt: str | None) -> str:
    """The model's response: the query without its prompt in front."""
    if prompt and query.startswith(prompt):
        return query[len(prompt) :]
    return query


def to_items(body: OpenRLHFRequest, kind: str) -> list[dict[str, Any]]:
    n = len(body.query)
    for name, values in (("prompts", body.prompts), ("labels", body.labels)):
        if values is not None and len(values) != n:
            raise InvalidRequestError(
                f"{name} has {len(values)} entries for {n} queries",
                hint="send one prompt and one label per query, or leave them out",
            )
    mapping = MAPPINGS[kind]
    prompts = body.prompts or [""] * n
    labels = body.labels or [None] * n
    return [
        with_group(
            mapping(prompt, response_text(query, prompt), {"label": label}), group_key(prompt)
        )
        for query, prompt, label in zip(body.query, prompts, labels, strict=True)
    ]


def to_response(job: JobOut, missing_reward: float) -> OpenRLHFResponse:
    rewards = [item.reward for item in job.items]
    values: list[float] = []
    flags: dict[str, list[float]] = {s.value: [] for s in RewardStatus}
    for reward in rewards:
        value = (
            reward.value if reward is not None and reward.status == RewardStatus.scored else None
        )
        values.append(missing_reward if value is None else float(value))
        status = reward.status if reward is not None else RewardStatus.pending
        for name, column in flags.items():
            column.append(float(status.value == name))
    names = sorted({c for r in rewards if r is not None for c in r.components})
    extra = dict(flags)
    for name in names:
        extra[name] = [
            float(r.components[name]) if r is not None and name in r.components else 0.0
            for r in rewards
        ]
    return OpenRLHFResponse(rewards=values, scores=list(values), extra_logs=extra)


@router.post("/v1/compat/openrlhf")
async def openrlhf_rewards(
    body: OpenRLHFRequest,
    principal: CurrentPrincipal,
    settings: SettingsDep,
    waiter: WaiterDep,
    policy: Annotated[str, Query(description="Policy to score under.")] = "default",
    kind: Annotated[
        Literal["molecule", "code"], Query(description="How a response becomes an item.")
    ] = "molecule",
    wait_s: Annotated[float, Query(ge=0, description="Longest wait for the rewards.")] = 120.0,
    missing_reward: Annotated[
        float, Query(description="Reward sent for pending and infra_error items.")
    ] = 0.0,
    idempotency_key: Annotated[str | None, Header(max_length=256, pattern=PRINTABLE)] = None,
) -> OpenRLHFResponse:
    """OpenRLHF remote reward model protocol: queries in, one reward per query out."""
    if len(body.query) > settings.api.max_items:
        raise PayloadTooLargeError(
            f"{len(body.query)} queries in one request; the limit is {settings.api.max_items}",
            hint="lower OpenRLHF's micro batch size for the remote reward model",
        )
    try:
        request = RewardRequest.model_validate(
            {
                "policy": policy,
                "items": to_items(body, kind),
                "wait_s": min(wait_s, settings.api.max_wait_s),
            }
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidRequestError(
            f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}",
            hint="check the kind query parameter and the labels",
        ) from None
    job = await submit_and_wait(request, principal, idempotency_key, waiter, settings)
    return to_response(job, missing_reward)
