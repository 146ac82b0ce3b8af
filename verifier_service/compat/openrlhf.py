"""OpenRLHF's remote reward model protocol, on top of the reward API.

OpenRLHF (`--reward.remote_url` from 0.10, `--remote_rm_url` before) posts
`{"query": [...], "prompts": [...], "labels": [...]}` and reads
`{"rewards": [...], "scores": [...], "extra_logs": {...}}`.

Mapping: each query is the prompt followed by the model's response, decoded with the tokenizer's
special tokens kept. The response is found by `split_response` (the prompt in front, the prompt
after a BOS or other text, or the tail of a cut prompt), then the special tokens at its ends are
stripped. With `kind=molecule` the response's SMILES (first parsable one) is scored and the label,
if any, is the reference SMILES; with `kind=code` the response's fenced code block is run against
the label as its tests. Responses to the same prompt form one GRPO group.

OpenRLHF needs a number for every sample and merges `extra_logs` by key across requests, so every
answer under a policy carries the same keys: the status flags, how the response was found, and
one key per reward component of the policy (0.0 where an item has none, flagged by
`components_missing`). Pending and infra_error rewards score `missing_reward`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field, ValidationError

from verifier_service.auth.deps import KEY_IN_PATH, TrainerPrincipal
from verifier_service.client.mappings import (
    DEFAULT_SPECIAL_TOKENS,
    PROMPT_FOUND,
    CodeMapping,
    ItemMapping,
    SmilesMapping,
    group_key,
    split_response,
    strip_special_tokens,
    with_group,
)
from verifier_service.core.db import get_sessionmaker
from verifier_service.core.deps import PRINTABLE, SettingsDep, WaiterDep
from verifier_service.core.errors import InvalidRequestError, PayloadTooLargeError
from verifier_service.jobs.schemas import JobOut, RewardRequest, RewardStatus
from verifier_service.jobs.service import submit_and_wait
from verifier_service.policies import service as policies

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
        description="Per-query numbers OpenRLHF logs, the same keys in every answer under a "
        "policy: scored/pending/infra_error flags, components_missing, prompt_found, "
        "special_tokens_stripped, response_chars and the policy's reward components (0.0 where "
        "an item has none, e.g. an invalid molecule)."
    )


#: Keys of every answer's extra_logs besides the policy's reward components.
FLAG_KEYS = (
    "scored",
    "pending",
    "infra_error",
    "components_missing",
    "prompt_found",
    "special_tokens_stripped",
    "response_chars",
)


@dataclass(frozen=True)
class Response:
    """What was taken from one query to be scored, and how it was found."""

    text: str
    prompt_found: str
    special_tokens_stripped: int


def find_response(query: str, prompt: str | None, special_tokens: Sequence[str]) -> Response:
    """The model's response in an OpenRLHF query, without the tokenizer's special tokens."""
    text, found = split_response(query, prompt)
    if found == "none" and special_tokens:
        # The prompt may be sent without the BOS text that the decoded query starts with.
        bare_query, _ = strip_special_tokens(query, special_tokens)
        bare_prompt, _ = strip_special_tokens(prompt or "", special_tokens)
        text, found = split_response(bare_query, bare_prompt)
    text, removed = strip_special_tokens(text, special_tokens) if special_tokens else (text, 0)
    return Response(text=text, prompt_found=found, special_tokens_stripped=removed)


def to_items(
    body: OpenRLHFRequest, kind: str, special_tokens: Sequence[str]
) -> tuple[list[dict[str, Any]], list[Response]]:
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
    responses = [
        find_response(query, prompt, special_tokens)
        for query, prompt in zip(body.query, prompts, strict=True)
    ]
    items = [
        with_group(mapping(prompt, response.text, {"label": label}), group_key(prompt))
        for response, prompt, label in zip(responses, prompts, labels, strict=True)
    ]
    return items, responses


def component_keys(policy: str, version: int, kind: str) -> list[str]:
    """The reward component names every reward of `kind` under this policy version can carry:
    the reward spec's components, or (without any) the ladder's tiers."""
    with get_sessionmaker()() as session:
        document = policies.resolve(session, policy, version).document
    spec = document.reward_for(kind)
    if spec.components:
        return [c.name for c in spec.components]
    return [step.tier for step in document.ladder_for(kind)]


def to_response(
    job: JobOut, responses: Sequence[Response], components: Sequence[str], missing_reward: float
) -> OpenRLHFResponse:
    values: list[float] = []
    extra: dict[str, list[float]] = {key: [] for key in (*FLAG_KEYS, *components)}
    for item, response in zip(job.items, responses, strict=True):
        reward = item.reward
        status = reward.status if reward is not None else RewardStatus.pending
        value = reward.value if reward is not None and status == RewardStatus.scored else None
        values.append(missing_reward if value is None else float(value))
        have = reward.components if reward is not None else {}
        for name in components:
            extra[name].append(float(have.get(name, 0.0)))
        extra["scored"].append(float(value is not None))
        extra["pending"].append(float(status == RewardStatus.pending))
        extra["infra_error"].append(float(status == RewardStatus.infra_error))
        extra["components_missing"].append(float(any(name not in have for name in components)))
        extra["prompt_found"].append(PROMPT_FOUND[response.prompt_found])
        extra["special_tokens_stripped"].append(float(response.special_tokens_stripped))
        extra["response_chars"].append(float(len(response.text)))
    return OpenRLHFResponse(rewards=values, scores=list(values), extra_logs=extra)


TOO_MANY_HINT = (
    "OpenRLHF 0.8.x sends a whole rollout batch (rollout_batch_size x n_samples_per_prompt) in "
    "one request, split evenly over the URLs given to --remote_rm_url: give the URL several "
    "times (comma-separated), lower those sizes, or ask the operator to raise api.max_items. "
    "OpenRLHF >= 0.10 (--reward.remote_url) sends the samples of one agent execution per request."
)


@router.post("/v1/compat/openrlhf")
@router.post(
    "/k/{api_key}/v1/compat/openrlhf",
    dependencies=[KEY_IN_PATH],
    summary="Openrlhf Rewards (API key in the path)",
)
async def openrlhf_rewards(
    body: OpenRLHFRequest,
    principal: TrainerPrincipal,
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
    strip_special_tokens: Annotated[
        bool, Query(description="Strip the tokenizer's special tokens from each response.")
    ] = True,
    special_token: Annotated[
        list[str] | None,
        Query(
            description="Special-token texts to strip (repeat the parameter for several); "
            "default: the common ones (<|im_end|>, </s>, <|endoftext|>, <|eot_id|>, ...)."
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None, Header(min_length=1, max_length=256, pattern=PRINTABLE)
    ] = None,
) -> OpenRLHFResponse:
    """OpenRLHF remote reward model protocol: queries in, one reward per query out."""
    if len(body.query) > settings.api.max_items:
        raise PayloadTooLargeError(
            f"{len(body.query)} queries in one request; the limit is {settings.api.max_items}",
            hint=TOO_MANY_HINT,
        )
    tokens: Sequence[str] = ()
    if strip_special_tokens:
        tokens = special_token or DEFAULT_SPECIAL_TOKENS
    items, responses = to_items(body, kind, tokens)
    try:
        request = RewardRequest.model_validate(
            {
                "policy": policy,
                "items": items,
                "wait_s": min(wait_s, settings.api.max_wait_s),
            }
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidRequestError(
            f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}",
            hint="check the kind query parameter and the labels",
        ) from None
    # Rewards only: OpenRLHF reads no verdicts.
    job = await submit_and_wait(
        request, principal, idempotency_key, waiter, settings, verdicts=False
    )
    components = await run_in_threadpool(component_keys, job.policy, job.policy_version, kind)
    return to_response(job, responses, components, missing_reward)
