"""Settings of the judge tiers (the service composes them as its `judge` group): the named
endpoints policies may use, and how calls to them are retried and cut off."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class JudgeEndpoint(BaseModel):
    """One OpenAI-compatible chat-completions server a policy can name."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        description="Base URL of the server's OpenAI API, e.g. http://vllm:8000/v1 "
        "(`/chat/completions` is appended)."
    )
    model: str = Field(description="The `model` sent with each request.")
    api_key: SecretStr | None = Field(
        default=None, description="Bearer token for the server, if it wants one."
    )
    max_in_flight: int = Field(
        default=32, ge=1, le=4096, description="Requests one process keeps open at once."
    )
    rate_limit_per_s: float | None = Field(
        default=None,
        gt=0,
        description="Most requests one process starts per second (none: no limit).",
    )
    price_per_1k_prompt: float = Field(
        default=0.0, ge=0, description="Cost units per 1,000 prompt tokens."
    )
    price_per_1k_completion: float = Field(
        default=0.0, ge=0, description="Cost units per 1,000 completion tokens."
    )
    timeout_s: float = Field(default=60.0, gt=0, description="Wall clock of one request.")


class JudgeSettings(BaseModel):
    """The judge tiers' endpoints and call discipline (not set by the policy)."""

    endpoints: dict[str, JudgeEndpoint] = Field(
        default_factory=dict,
        description="Endpoints by name, as a JSON map in VERIFIER_JUDGE__ENDPOINTS, e.g. "
        '{"local": {"url": "http://127.0.0.1:8001/v1", "model": "qwen"}}. Policies name one.',
    )
    max_retries: int = Field(
        default=3, ge=0, le=20, description="Retries of a call that got a 429, a 5xx or no answer."
    )
    backoff_s: float = Field(
        default=0.5, ge=0, description="First retry's wait; doubled for each further one."
    )
    backoff_max_s: float = Field(
        default=30.0, ge=0, description="Longest wait between two tries, Retry-After included."
    )
    breaker_failures: int = Field(
        default=5,
        ge=1,
        description="Consecutive failed tries (any call's, retries included) after which an "
        "endpoint's circuit opens: calls to it then fail at once as error verdicts naming it.",
    )
    breaker_reset_s: float = Field(
        default=30.0,
        gt=0,
        description="How long an open circuit stays open before one trial call is let through.",
    )
    max_wait_s: float = Field(
        default=300.0,
        ge=0,
        description="Longest time a batch keeps trying an endpoint that is down (retries spent "
        "or circuit open) before its items get error verdicts; never past the items' deadline "
        "less deadline_margin_s. 0: no waiting beyond the retries.",
    )
    deadline_margin_s: float = Field(
        default=2.0,
        ge=0,
        description="Waiting for an endpoint that is down stops this long before the items' "
        "deadline, so that their error verdicts (naming the endpoint) are stored in time.",
    )
