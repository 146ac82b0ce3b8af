"""The payload of a `code` candidate and the policy config of the code.sandbox tier.

CodePayload is also the API's request model of code items, so whatever the tier would refuse is
refused at submit (422 with the field's path) instead of becoming an error verdict later.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from tiers.code.settings import SandboxSettings
from tiers.registry import settings_for

#: The validation error type of a payload over the sandbox.max_source_bytes setting.
SOURCE_LIMIT_ERROR = "payload_too_large"
#: The validation error type of a payload in a language whose sandbox image is not built.
LANGUAGE_NOT_BUILT_ERROR = "language_not_built"


class SandboxConfig(BaseModel):
    """Policy config of the code.sandbox tier."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float | None = Field(
        default=None, gt=0, description="Wall-clock limit per candidate; default: the setting."
    )
    memory_mb: int | None = Field(
        default=None, ge=64, description="Memory limit per candidate; default: the setting."
    )
    isolation: Literal["process", "container"] | None = Field(
        default=None,
        description="process: the job's candidates in fresh processes of one container per "
        "job; container: one container per candidate; default: the setting.",
    )
    scoring: Literal["fraction", "all_or_nothing"] = Field(
        default="fraction",
        description="fraction: share of tests passed; all_or_nothing: 1 only if all pass.",
    )


class IOCase(BaseModel):
    """One stdin/stdout case: the program gets `stdin` and must write `stdout`."""

    model_config = ConfigDict(extra="forbid")

    stdin: str = Field(default="", description="What the program reads on stdin.")
    stdout: str = Field(description="What it must write, as the checker compares it.")


class CodePayload(BaseModel):
    """Source code and the tests that judge it."""

    model_config = ConfigDict(extra="forbid")

    language: str = Field(
        default="python",
        description="python, bash, c, cpp (C++17; cpp11/cpp14/cpp20 for another standard), "
        "java (class Main), nodejs (javascript), typescript, go, rust, or an alias of one "
        "(SandboxFusion's names included). Other languages than Python run their program "
        "against `cases`, or compile `code` with `tests` appended (an assert-style main) and "
        "pass when it exits with 0. A language whose image is not built is refused.",
    )
    code: str = Field(
        description="The candidate's source, written to solution.py (or the language's file)."
    )
    compile_timeout_s: float | None = Field(
        default=None,
        gt=0,
        le=600,
        description="Compile time limit of a compiled language; default: the language's. "
        "Above the sandbox.compile_max_timeout_s setting it is lowered to it.",
    )
    cases: list[IOCase] | None = Field(
        default=None,
        max_length=1000,
        description="stdin/stdout cases (competitive-programming style): solution.py runs once "
        "per case; the score is the fraction of cases passed (or all-or-nothing).",
    )
    tests: str = Field(
        default=None,
        validate_default=True,
        description="pytest tests (test_* functions) or an assert-style script run after the "
        "code in the same namespace; pytest tests see the solution's names or import them "
        "from `solution`. Required unless `cases` is given.",
    )
    checker: Literal["exact", "tokens", "float", "special"] = Field(
        default="tokens",
        description="How a case's output is compared: exact (but a final newline), tokens "
        "(whitespace-insensitive), float (tokens, numbers within abs_tol/rel_tol), special "
        "(checker_code's check(stdin, output, expected) -> True; it runs in the judge).",
    )
    checker_code: str | None = Field(
        default=None, description="The special judge's Python source (checker `special`)."
    )
    abs_tol: float = Field(default=1e-6, ge=0, description="Float checker: absolute tolerance.")
    rel_tol: float = Field(default=1e-6, ge=0, description="Float checker: relative tolerance.")
    case_timeout_s: float = Field(
        default=2.0, gt=0, le=60, description="Wall-clock limit of one case."
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
        """Size of code, tests, setup and cases, as the sandbox.max_source_bytes setting counts."""
        parts = [self.code, self.tests, self.setup or "", self.checker_code or ""]
        parts += [c.stdin + c.stdout for c in self.cases or []]
        return sum(len(s.encode()) for s in parts)

    @field_validator("tests", mode="before")
    @classmethod
    def _tests_unless_cases(cls, tests: object, info: ValidationInfo) -> object:
        # `cases` is declared before `tests`, so it is validated (and in info.data) by now.
        if info.data.get("cases"):
            return "" if tests is None else tests
        if tests is None:
            raise PydanticCustomError("missing", "Field required (or give `cases`)")
        if tests == "":
            raise PydanticCustomError(
                "string_too_short",
                "String should have at least 1 character (or give `cases`)",
                {"min_length": 1},
            )
        return tests

    @field_validator("language")
    @classmethod
    def _language_known(cls, language: str) -> str:
        from tiers.code.languages import UnknownLanguageError, get_language

        try:
            get_language(language)
        except UnknownLanguageError as exc:
            raise PydanticCustomError("unsupported_language", str(exc)) from None
        return language

    @model_validator(mode="after")
    def _language_built(self, info: ValidationInfo) -> Self:
        from tiers.code.languages import get_language

        language = get_language(self.language)
        if language.family == "python":
            return self
        from tiers.code.sandbox_languages import image_for, language_built

        settings = (info.context or {}).get("sandbox_settings")
        if not isinstance(settings, SandboxSettings):
            settings = settings_for("code", SandboxSettings)
        if language_built(language, settings) is False:
            raise PydanticCustomError(
                LANGUAGE_NOT_BUILT_ERROR,
                "language {language!r} needs the sandbox image {image}, which is not built; "
                "build it with `verifier-service sandbox build-image --language {language}`",
                {"language": language.name, "image": image_for(language, settings)},
            )
        return self

    @model_validator(mode="after")
    def _special_checker_has_code(self) -> Self:
        if self.checker == "special" and not (self.checker_code or "").strip():
            raise ValueError("checker `special` needs `checker_code` defining check()")
        return self

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
