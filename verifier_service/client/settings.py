"""Client settings from the environment (VERIFIER_CLIENT__*), for adapters loaded by path."""

from __future__ import annotations

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class ClientSettings(BaseSettings):
    """Where the service is and how to talk to it; keyword arguments override every field."""

    model_config = SettingsConfigDict(env_prefix="VERIFIER_CLIENT__", extra="ignore")

    base_url: str = Field(default="http://127.0.0.1:8000", description="Service root URL.")
    api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("VERIFIER_API_KEY", "VERIFIER_CLIENT__API_KEY"),
        description="API key sent as `Authorization: Bearer ...` (env VERIFIER_API_KEY).",
    )
    principal: str | None = Field(
        default=None,
        description="Sent as X-Principal: an operator's key submits on behalf of this principal "
        "(ignored for other keys).",
    )
    policy: str = Field(default="default", description="Policy the adapters score under.")
    timeout_s: float = Field(default=120.0, description="Longest wait for one batch of rewards.")
    retries: int = Field(default=4, description="Retries on connection errors, 5xx and 429.")
    ride_out_s: float = Field(
        default=90.0,
        description="How long a request keeps being retried on connection errors, 5xx and 429 "
        "after its first attempt (at least `retries` times): rides out an API restart.",
    )
    batch_size: int = Field(default=512, description="Most items sent in one request.")
