"""Errors of the sandbox domain, rendered by the service's one error handler."""

from __future__ import annotations

from tiers.code.languages import Language
from tiers.code.sandbox_languages import image_for
from tiers.code.settings import SandboxSettings
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
