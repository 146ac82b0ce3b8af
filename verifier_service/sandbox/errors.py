"""Errors of the sandbox domain, rendered by the service's one error handler."""

from __future__ import annotations

from tiers.code.languages import Language
from tiers.code.sandbox_languages import image_for
from tiers.code.settings import SandboxSettings
from verifier_service.auth.errors import RateLimitedError
from verifier_service.core.errors import DomainError


class LanguageNotBuiltRequestError(DomainError):
    """A `/run_code` request in a language whose sandbox image is not built."""

    status_code = 422
    code = "language_not_built"

    def __init__(self, language: Language, settings: SandboxSettings) -> None:
        image = image_for(language, settings)
        super().__init__(
            f"language {language.name!r} needs the sandbox image {image}, which is not built "
            "on this service's Docker engine",
            hint=f"build it with `verifier-service sandbox build-image --language {language.name}`"
            " (or `--all` for every language)",
            language=language.name,
            image=image,
        )


class RunCodeBusyError(RateLimitedError):
    """A `/run_code` over a concurrency cap: 429 with Retry-After; `cap` says which one
    (`per_key`: the caller's own runs in flight; `overall`: the API process's)."""

    code = "run_code_busy"

    def __init__(self, message: str, *, cap: str, limit: int) -> None:
        setting = "run_code_concurrency_per_key" if cap == "per_key" else "run_code_concurrency"
        super().__init__(
            f"{message}; try again when one ends (the operator's setting "
            f"VERIFIER_SANDBOX__{setting.upper()})",
            retry_after_s=1, cap=cap, limit=limit,
        )  # fmt: skip
