"""The payload of a `code` candidate and the policy config of the code.sandbox tier.

CodePayload is also the API's request model of code items, so whatever the tier would refuse is
refused at submit (422 with the field's path) instead of becoming an error verdict later.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from tiers.code.settings import SandboxSettings
from tiers.registry import settings_for

#: The validation error type of a payload over the sandbox.max_source_bytes setting.
SOURCE_LIMIT_ERROR = "payload_too_large"


class SandboxConfig(BaseModel):
    """Policy config of the code.sandbox tier."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float | None = Field(
        default=None, gt=0, description="Wall-clock limit per candidate; default: the setting."
    )
    memory_mb: int | None = Field(
        default=None, ge=64, description="Memory limit per candidate; default: the setting."
    )
    scoring: Literal["fraction", "all_or_nothing"] = Field(
        default="fraction",
        description="fraction: share of tests passed; all_or_nothing: 1 only if all pass.",
    )


class CodePayload(BaseModel):
    """Source code and the tests that judge it."""

    model_config = ConfigDict(extra="forbid")

    language: str = Field(
        default="python",
        description="Only python is supported; another language is a failed verdict.",
    )
    code: str = Field(description="The candidate's source, written to solution.py.")
    tests: str = Field(
        min_length=1,
        description="pytest tests (test_* functions) or an assert-style script run after the "
        "code in the same namespace; pytest tests see the solution's names or import them "
        "from `solution`.",
    )
    setup: str | None = Field(
        default=None, description="Python run in the work dir before the code is written."
    )
    fail_to_pass: list[str] | None = Field(
        default=None, description="Tests that must pass now (SWE-bench style rule)."
    )
    pass_to_pass: list[str] | None = Field(
        default=None, description="Tests that passed before and must still pass."
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        le=600,
        description="Wall-clock limit; overrides the config. Above the sandbox.max_timeout_s "
        "setting it is lowered to it.",
    )
    memory_mb: int | None = Field(
        default=None,
        ge=64,
        le=16384,
        description="Memory limit; overrides the config. Above the sandbox.max_memory_mb "
        "setting it is lowered to it.",
    )

    def source_bytes(self) -> int:
        """Size of code + tests + setup, as the sandbox.max_source_bytes setting counts it."""
        return sum(len(s.encode()) for s in (self.code, self.tests, self.setup or ""))

    @model_validator(mode="after")
    def _within_source_limit(self, info: ValidationInfo) -> Self:
        # The limit of the settings in the validation context (the tier passes its own), else
        # of those handed to this process (tiers.registry.configure): the API's at submit.
        settings = (info.context or {}).get("sandbox_settings")
        if not isinstance(settings, SandboxSettings):
            settings = settings_for("code", SandboxSettings)
        size = self.source_bytes()
        if size > settings.max_source_bytes:
            raise PydanticCustomError(
                SOURCE_LIMIT_ERROR,
                "code + tests + setup are {size} bytes; the limit is {limit} "
                "(sandbox.max_source_bytes)",
                {"size": size, "limit": settings.max_source_bytes},
            )
        return self
