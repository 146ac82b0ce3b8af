"""Client settings from the environment (VERIFIER_CLIENT__*), for adapters loaded by path."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ClientSettings(BaseSettings):
    """Where the service is and how to talk to it; keyword arguments override every field."""

    model_config = SettingsConfigDict(env_prefix="VERIFIER_CLIENT__", extra="ignore")

    base_url: str = Field(default="http://127.0.0.1:8000", description="Service root URL.")
    principal: str | None = Field(default=None, description="Sent as X-Principal.")
    policy: str = Field(default="default", description="Policy the adapters score under.")
    timeout_s: float = Field(default=120.0, description="Longest wait for one batch of rewards.")
    retries: int = Field(default=4, description="Retries on connection errors, 5xx and 429.")
    batch_size: int = Field(default=512, description="Most items sent in one request.")
