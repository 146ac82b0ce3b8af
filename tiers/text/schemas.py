"""Policy config of the text tiers: what a policy step's `config` may say to each of them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

Extractor = Literal[
    "boxed", "gsm8k", "answer_is", "answer_tag", "last_number", "json_field", "regex", "whole"
]
CompareMode = Literal["math", "numeric", "choice", "exact", "normalized", "set", "list"]


_DEFAULT_EXTRACT: tuple[Extractor, ...] = ("boxed", "answer_tag", "gsm8k", "answer_is")
Check = Literal["shape", "length", "repetition"]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


C = TypeVar("C", bound=_Config)


def parse_config(model: type[C], config: Mapping[str, Any]) -> C:
    """A policy step's `config` as its text tier's model; a ValueError that says what is wrong
    (what a tier's `validate_config` raises when a policy is saved)."""
    try:
        return model.model_validate(dict(config))
    except ValidationError as exc:
        raise ValueError(str(exc)) from None


class AnswerConfig(_Config):
    """Policy config of the `answer` tier: how the final answer is found, and how compared."""

    extract: list[Extractor] = Field(
        default_factory=lambda: list(_DEFAULT_EXTRACT),
        min_length=1,
        description="Extractors tried in this order; the first that finds an answer wins.",
    )
    mode: CompareMode = Field(default="math", description="How the answer meets the reference.")
    several_boxed: Literal["last", "reject"] = Field(
        default="last",
        description="With several \\boxed{}: the last counts (`last`), or several different "
        "ones are a failure (`reject`).",
    )
    answer_tag: str = Field(
        default="answer", pattern=r"^[A-Za-z][\w-]{0,31}$", description="Tag of `answer_tag`."
    )
    think_tag: str | None = Field(
        default="think",
        pattern=r"^[A-Za-z][\w-]{0,31}$",
        description="Thinking blocks in this tag are removed before extraction (an answer "
        "inside them does not count; an unclosed one runs to the end). None: keep them.",
    )
    json_field: str | None = Field(
        default=None,
        description="Dotted path of the answer in a JSON object in the text (`json_field`).",
    )
    regex: str | None = Field(
        default=None,
        description="Pattern of `regex`: its group `answer`, else group 1, else the whole "
        "match; the last match counts.",
    )
    rel_tol: float = Field(
        default=1e-9,
        ge=0,
        description="`numeric`: relative tolerance (the default is tight so that 1000001 never "
        "passes for 1000000; loosen it for measured quantities).",
    )
    abs_tol: float = Field(default=1e-9, ge=0, description="`numeric`: absolute tolerance.")
    choices: str = Field(
        default="ABCDE",
        pattern=r"^[A-Z]{2,26}$",
        description="`choice`: the option letters, in order (reference.choices gives their text).",
    )
    element_mode: Literal["numeric", "exact", "normalized"] = Field(
        default="normalized",
        description="`set`/`list`: how elements compare (`normalized` also equates numbers).",
    )
    separators: str = Field(
        default=r",|;|\band\b",
        description="`set`/`list`: regex splitting an answer into elements.",
    )
    max_answer_chars: int = Field(
        default=1000, ge=1, le=100_000, description="Longer extracted answers fail unread."
    )
    max_text_chars: int = Field(
        default=200_000, ge=1, le=10_000_000, description="Longer texts fail unread."
    )
    math_timeout_s: float | None = Field(
        default=None, gt=0, description="Lower the settings' math_timeout_s for this policy."
    )

    @field_validator("regex", "separators")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _needs(self) -> AnswerConfig:
        if "regex" in self.extract and not self.regex:
            raise ValueError("extractor `regex` needs `regex` (the pattern)")
        if "json_field" in self.extract and not self.json_field:
            raise ValueError("extractor `json_field` needs `json_field` (a dotted path)")
        if len(set(self.extract)) != len(self.extract):
            raise ValueError("an extractor appears twice in `extract`")
        return self


class FormatConfig(_Config):
    """Policy config of the `format` tier: which checks run, each one a verdict component."""

    checks: list[Check] = Field(
        default_factory=lambda: list[Check](["shape", "length", "repetition"]),
        min_length=1,
        description="Checks to run; the score is the product of their components.",
    )
    think_tag: str = Field(default="think", pattern=r"^[A-Za-z][\w-]{0,31}$")
    answer_tag: str = Field(default="answer", pattern=r"^[A-Za-z][\w-]{0,31}$")
    require_think: bool = Field(
        default=True, description="`shape`: one thinking block must come before the answer."
    )
    unit: Literal["chars", "words", "tokens"] = Field(
        default="words",
        description="`length`: characters, whitespace-separated words, or the model tokens of "
        "`tokenizer`.",
    )
    tokenizer: str | None = Field(
        default=None,
        min_length=1,
        max_length=500,
        description="`length` with unit `tokens`: the model's tokenizer, a local path (a "
        "tokenizer.json or a folder with one) or a hub id in the local Hugging Face cache; "
        "loaded offline, never downloaded.",
    )
    tokenizer_fallback: Literal["words", "chars"] | None = Field(
        default=None,
        description="`tokens`: count in this unit instead when the tokenizer cannot be loaded "
        "where the check runs (the feedback says so). None: the verdict is an error "
        "(tokenizer_unavailable), never a count in another unit.",
    )
    max_length: int = Field(default=4096, ge=1, description="`length`: hard limit (DAPO L_max).")
    overlong_buffer: int = Field(
        default=1024,
        ge=0,
        description="`length`: DAPO's soft zone L_cache before max_length, where the length "
        "component falls linearly from 1 to 0.",
    )
    ngram: int = Field(default=4, ge=1, le=16, description="`repetition`: n of the n-grams.")
    max_repeated_fraction: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="`repetition`: the fraction of repeated n-grams at which the repetition "
        "component reaches 0 (it falls linearly from 1 at none).",
    )

    @model_validator(mode="after")
    def _buffer(self) -> FormatConfig:
        if self.overlong_buffer >= self.max_length:
            raise ValueError("overlong_buffer must be less than max_length")
        if self.unit == "tokens" and self.tokenizer is None:
            raise ValueError(
                "unit `tokens` counts a model's tokens: name its `tokenizer` (a local path or a "
                "cached hub id), or count `words` or `chars`"
            )
        if self.unit != "tokens" and self.tokenizer is not None:
            raise ValueError(f"`tokenizer` is used only with unit `tokens`, not `{self.unit}`")
        if self.unit != "tokens" and self.tokenizer_fallback is not None:
            raise ValueError("`tokenizer_fallback` is used only with unit `tokens`")
        return self


class SimilarityConfig(_Config):
    """Policy config of the `similarity` tier: OpenAI string_check / text_similarity graders."""

    operation: Literal["eq", "ne", "like", "ilike"] | None = Field(
        default=None, description="string_check operation (case-sensitive except ilike)."
    )
    metric: Literal["fuzzy_match", "bleu", "chrf", "rouge_l"] | None = Field(
        default=None, description="text_similarity metric, scored in [0, 1]."
    )
    pass_threshold: float = Field(
        default=0.5, ge=0, le=1, description="text_similarity: passed at or above this score."
    )
    think_tag: str | None = Field(
        default="think",
        pattern=r"^[A-Za-z][\w-]{0,31}$",
        description="Thinking blocks in this tag are removed before comparing.",
    )
    max_text_chars: int = Field(default=200_000, ge=1, description="Longer texts fail unread.")

    @model_validator(mode="after")
    def _exactly_one(self) -> SimilarityConfig:
        if (self.operation is None) == (self.metric is None):
            raise ValueError("give exactly one of `operation` (string_check) and `metric`")
        return self
