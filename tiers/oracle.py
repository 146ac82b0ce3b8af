"""The `oracle` tier: an outside system (a wet lab, a market) measures items, days later.

This module holds what the tier is: the oracles an operator defines (how to reach each, its
capacity, the values it sends back with their units, how a value maps to a score), the config a
policy step gives the tier, and the verdict a result becomes. The work itself is deferred, as
the `human` tier's is: the ladder hands items to the service's oracle domain, which batches them
for the partner and records the verdict when the result comes back. `verify_batch` (reached
only by a replay asked to compute missing verdicts) says that an oracle's verdicts cannot be
computed here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from tiers.base import Candidate, Verdict, VerdictStatus, stable_json

#: What an oracle and a result field can be named.
NAME_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"


class ResultField(BaseModel):
    """One measured value an oracle sends back."""

    model_config = ConfigDict(extra="forbid")

    unit: str = Field(min_length=1, max_length=64, description="Its unit, e.g. `nM`, `USD`.")
    min: float | None = Field(default=None, description="Lowest plausible value (refused below).")
    max: float | None = Field(default=None, description="Highest plausible value (refused above).")
    required: bool = Field(default=True, description="Every result carries it.")


class ScoreMap(BaseModel):
    """How one result value becomes the verdict's score: linear from `low` (0) to `high` (1),
    clamped; `low > high` when lower is better (an IC50)."""

    model_config = ConfigDict(extra="forbid")

    field: str = Field(description="The result field scored.")
    low: float = Field(description="The value that scores 0.")
    high: float = Field(description="The value that scores 1.")

    @model_validator(mode="after")
    def _distinct(self) -> ScoreMap:
        if self.low == self.high:
            raise ValueError("score: low and high must differ")
        return self

    def score(self, value: float) -> float:
        return min(1.0, max(0.0, (value - self.low) / (self.high - self.low)))


class OracleDefinition(BaseModel):
    """One outside system, as the operator defines it in settings."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    mode: Literal["push", "pull"] = Field(description="push: we POST batches; pull: it claims.")
    url: str | None = Field(default=None, description="push: where batches are POSTed.")
    secret: SecretStr | None = Field(
        default=None, description="push: the `whsec_<base64>` key that signs batches."
    )
    principal: str | None = Field(
        default=None,
        description="API key principal (role `oracle`) that serves this oracle; default its name.",
    )
    capacity: int = Field(default=96, ge=1, description="Items sent per period at most.")
    period_s: float = Field(default=86400.0, gt=0, description="Length of a capacity period.")
    batch_size: int = Field(default=96, ge=1, description="Items per batch.")
    turnaround_s: float = Field(
        default=259200.0, gt=0, description="Expected time to a result (later: overdue)."
    )
    price_per_item: float = Field(default=0.0, ge=0, description="Cost units per item sent.")
    gather_s: float = Field(
        default=0.0, ge=0, description="Items wait this long before selection for capacity."
    )
    result_schema: dict[str, ResultField] = Field(
        min_length=1, description="The measured values that come back, by name."
    )
    score: ScoreMap = Field(description="How a result value maps to the verdict's score.")
    on_failure: Literal["retry_once", "error"] = Field(
        default="retry_once",
        description="A failed measurement: sent once more in a later batch, or an error verdict.",
    )
    lease_s: float = Field(default=300.0, gt=0, le=86400, description="pull: a claim's lease.")
    retry_first_s: float = Field(default=5.0, gt=0, description="push: first retry wait.")
    retry_max_s: float = Field(default=3600.0, gt=0, description="push: longest retry wait.")
    retry_for_s: float = Field(
        default=86400.0, gt=0, description="push: retries stop this long after the first try."
    )
    timeout_s: float = Field(default=10.0, gt=0, description="push: one attempt's time limit.")

    @model_validator(mode="after")
    def _consistent(self) -> OracleDefinition:
        if self.mode == "push" and (self.url is None or self.secret is None):
            raise ValueError("a push oracle needs url and secret")
        if self.secret is not None and not self.secret.get_secret_value().startswith("whsec_"):
            raise ValueError("secret must be `whsec_` followed by base64")
        if self.score.field not in self.result_schema:
            raise ValueError(f"score.field {self.score.field!r} is not in result_schema")
        return self


class OracleSettings(BaseModel):
    """The oracles this deployment can send items to (`VERIFIER_ORACLES__DEFINITIONS`)."""

    public_url: str = Field(
        default="",
        description="The service's URL as partners reach it: a pushed batch's results_url is "
        "under it (empty: the path alone).",
    )
    definitions: dict[str, OracleDefinition] = Field(
        default_factory=dict,
        description="Oracles by name (JSON object): see docs/oracles.md for the fields.",
    )


class OracleStepConfig(BaseModel):
    """The config of an `oracle` ladder step."""

    model_config = ConfigDict(extra="forbid")

    oracle: str = Field(pattern=NAME_PATTERN, description="The oracle (defined in settings).")
    select_by: Literal["best_lower_tier", "uncertainty"] = Field(
        default="best_lower_tier",
        description="How items are valued when more want the oracle than its capacity.",
    )
    on_deadline: Literal["best_lower_tier", "infra_error"] = Field(
        default="best_lower_tier",
        description="The reward of an item the oracle has not answered at the job's deadline, "
        "or that capacity left out.",
    )
    keep_open_after_deadline: bool = Field(
        default=True,
        description="At the job's deadline the item stays with the oracle: its later result "
        "revises the fallback reward. False withdraws items not yet sent.",
    )


def config_error(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(config)'}: {err['msg']}"
        for err in exc.errors(include_url=False)
    )


def result_errors(definition: OracleDefinition, values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What is wrong with a result's values, as (field, message) pairs; empty when it fits."""
    errors = []
    for name, spec in definition.result_schema.items():
        if name not in values:
            if spec.required:
                errors.append((name, f"missing: the oracle's result schema requires {name!r}"))
            continue
        value = values[name]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            errors.append((name, f"must be a finite number ({spec.unit})"))
        elif spec.min is not None and value < spec.min:
            errors.append((name, f"{value} {spec.unit} is below the schema's min {spec.min}"))
        elif spec.max is not None and value > spec.max:
            errors.append((name, f"{value} {spec.unit} is above the schema's max {spec.max}"))
    for name in values:
        if name not in definition.result_schema:
            known = ", ".join(sorted(definition.result_schema))
            errors.append((name, f"not in the oracle's result schema (fields: {known})"))
    return errors


def result_verdict(name: str, definition: OracleDefinition, values: Mapping[str, float]) -> Verdict:
    """The verdict a valid result becomes: its values as components, the mapped score."""
    value = float(values[definition.score.field])
    units = ", ".join(
        f"{k} = {v:g} {definition.result_schema[k].unit}" for k, v in sorted(values.items())
    )
    components = {k: float(v) for k, v in values.items()}
    components["cost_units"] = definition.price_per_item
    return Verdict(
        status=VerdictStatus.passed,
        score=definition.score.score(value),
        components=components,
        feedback=f"measured by oracle {name}: {units}",
        tier=OracleTier.name,
        tier_version=OracleTier.version,
    )


def failure_verdict(name: str, reason: str, detail: str) -> Verdict:
    """The verdict of an item the oracle could not measure (or we could not reach it)."""
    return Verdict(
        status=VerdictStatus.error,
        reason=reason,
        feedback=f"oracle {name}: {detail}"[:2000],
        tier=OracleTier.name,
        tier_version=OracleTier.version,
    )


class OracleTier:
    """An outside system through the oracle protocol (deferred: no tier task runs it)."""

    name: ClassVar[str] = "oracle"
    version: ClassVar[str] = "1"
    #: No tier task ever runs this tier: its selection and pushes run on each oracle's own
    #: queue (`oracle.NAME`), which the webhooks' workers (`callbacks`) take unless told not to.
    queue: ClassVar[str] = "callbacks"
    cost_class: ClassVar[float] = 100.0
    kinds: ClassVar[frozenset[str]] = frozenset({"molecule", "code", "json", "text"})
    cheap_canonical_payload: ClassVar[bool] = True
    settings_model: ClassVar[type[BaseModel]] = OracleSettings

    def __init__(self, settings: OracleSettings | None = None) -> None:
        self.settings = settings or OracleSettings()

    def validate_config(self, config: Mapping[str, Any]) -> None:
        try:
            step = OracleStepConfig.model_validate(dict(config))
        except ValidationError as exc:
            raise ValueError(config_error(exc)) from None
        if step.oracle not in self.settings.definitions:
            known = ", ".join(sorted(self.settings.definitions)) or "none defined"
            raise ValueError(f"oracle: no oracle {step.oracle!r} in settings (known: {known})")

    def canonical_payload(self, item: Candidate) -> str:
        return stable_json({"payload": item.payload, "reference": item.reference})

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        name = str(config.get("oracle", "?"))
        return [
            failure_verdict(name, "oracle_only", "an oracle's results cannot be computed here")
            for _ in items
        ]
