"""The escalation policy document: ladders of tiers with CEL gates, budgets, reward composition.

Validate with ``PolicyDocument.model_validate(data, context={"known_tiers": {...}})``; tier names
are checked only when ``known_tiers`` is given. Every CEL expression is compiled and type-checked
here, so a saved policy never fails on a syntax or type error at run time.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from tiers.base import CandidateKind
from verifier_service.policies.gates import (
    ExpectKind,
    GateCompileError,
    check_expr,
    compile_expr,
    unknown_name_message,
)

Loc = tuple[str | int, ...]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- transforms

TransformType = Literal[
    "identity", "linear", "clip", "sigmoid", "reverse_sigmoid", "double_sigmoid", "step", "gaussian"
]


class IdentityTransform(_Strict):
    """The raw value, clipped to [0, 1]."""

    type: Literal["identity"] = Field(default="identity", description="Transform kind.")


class LinearTransform(_Strict):
    """Maps ``low``..``high`` linearly onto 0..1, clipped; ``low > high`` makes it decreasing."""

    type: Literal["linear"] = Field(description="Transform kind.")
    low: float = Field(description="Raw value that maps to 0.")
    high: float = Field(description="Raw value that maps to 1.")

    @model_validator(mode="after")
    def _distinct(self) -> LinearTransform:
        if self.low == self.high:
            raise ValueError("low and high must differ")
        return self


class ClipTransform(LinearTransform):
    """Same mapping as ``linear`` (``low``..``high`` onto 0..1, clipped), named for readability."""

    type: Literal["clip"] = Field(description="Transform kind.")  # type: ignore[assignment]


class SigmoidTransform(_Strict):
    """Rising logistic curve, 0.5 at the midpoint of ``low``..``high`` (REINVENT-style)."""

    type: Literal["sigmoid"] = Field(description="Transform kind.")
    low: float = Field(description="Lower end of the transition region.")
    high: float = Field(description="Upper end of the transition region.")
    k: float = Field(
        default=0.5,
        gt=0,
        description="Steepness: the value at `high` is 1/(1+10^(-5k)), 0.997 for k=0.5.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> SigmoidTransform:
        if not self.low < self.high:
            raise ValueError("low must be less than high")
        return self


class ReverseSigmoidTransform(SigmoidTransform):
    """Falling logistic curve: 1 - sigmoid; for properties where lower is better."""

    type: Literal["reverse_sigmoid"] = Field(description="Transform kind.")  # type: ignore[assignment]


class DoubleSigmoidTransform(_Strict):
    """A plateau of 1 between ``low`` and ``high`` with logistic edges ``width`` wide."""

    type: Literal["double_sigmoid"] = Field(description="Transform kind.")
    low: float = Field(description="Lower edge of the desirable window (value 0.5 here).")
    high: float = Field(description="Upper edge of the desirable window (value 0.5 here).")
    width: float = Field(default=0.5, gt=0, description="Softness of each edge, in raw units.")

    @model_validator(mode="after")
    def _ordered(self) -> DoubleSigmoidTransform:
        if not self.low < self.high:
            raise ValueError("low must be less than high")
        return self


class StepTransform(_Strict):
    """1 on the good side of ``threshold`` (inclusive), else 0."""

    type: Literal["step"] = Field(description="Transform kind.")
    threshold: float = Field(description="Boundary value; it counts as the good side.")
    direction: Literal["above", "below"] = Field(
        default="above", description="Which side of the threshold scores 1."
    )


class GaussianTransform(_Strict):
    """Bell curve: 1 at ``center``, exp(-1/2) at ``center +- width``."""

    type: Literal["gaussian"] = Field(description="Transform kind.")
    center: float = Field(description="Ideal raw value.")
    width: float = Field(gt=0, description="Standard deviation of the bell, in raw units.")


TransformSpec = Annotated[
    IdentityTransform
    | LinearTransform
    | ClipTransform
    | SigmoidTransform
    | ReverseSigmoidTransform
    | DoubleSigmoidTransform
    | StepTransform
    | GaussianTransform,
    Field(discriminator="type"),
]
"""Turns a raw component value into [0, 1]; the ``type`` field picks the shape."""


# --------------------------------------------------------------------------- reward


class ComponentSpec(_Strict):
    """One reward component: a number from one tier's verdict, transformed and weighted."""

    name: str = Field(min_length=1, description="Name of the component in the reward.")
    tier: str = Field(description="Tier whose verdict supplies the raw value.")
    component: str = Field(
        default="score",
        description="Key in that verdict's `components`, or `score` for the verdict score.",
    )
    transform: TransformSpec = Field(
        default_factory=IdentityTransform, description="Maps the raw value into [0, 1]."
    )
    weight: float = Field(default=1.0, ge=0, description="Weight in the aggregator.")


class PenaltySpec(_Strict):
    """Subtracted from the reward when its CEL condition holds (result clipped at 0)."""

    when: str = Field(description="CEL bool expression over verdicts/item.")
    value: float = Field(ge=0, description="Amount subtracted from the reward.")
    reason: str = Field(min_length=1, description="Recorded on the reward when applied.")


class HardGateSpec(_Strict):
    """A CEL condition that must hold, else the reward is 0 with this reason."""

    when: str = Field(description="CEL bool expression that must be true.")
    reason: str = Field(min_length=1, description="Recorded on the reward when it fails.")


class RewardSpec(_Strict):
    """Components -> transforms -> aggregator, then hard gates and penalties."""

    components: list[ComponentSpec] = Field(
        default_factory=list,
        description="Empty: the reward is the score of the highest tier that scored.",
    )
    aggregator: Literal["weighted_mean", "weighted_geometric_mean", "product", "min"] = Field(
        default="weighted_mean", description="How transformed components combine."
    )
    hard_gates: list[HardGateSpec] = Field(
        default_factory=list, description="Conditions that zero the reward when false."
    )
    penalties: list[PenaltySpec] = Field(
        default_factory=list, description="Deductions applied after aggregation."
    )


# --------------------------------------------------------------------------- ladder


class GroupSelect(_Strict):
    """Only the best of a GRPO group climb: top ``k`` or top fraction by ``by``."""

    top_k: int | None = Field(default=None, ge=1, description="How many of the group climb.")
    top_fraction: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Fraction of the group that climbs, rounded up, at least 1.",
    )
    by: str = Field(description="CEL number expression ranking the group; higher is better.")

    @model_validator(mode="after")
    def _exactly_one(self) -> GroupSelect:
        if (self.top_k is None) == (self.top_fraction is None):
            raise ValueError("give exactly one of top_k and top_fraction")
        return self


class LadderStep(_Strict):
    """One rung: a tier, its config, and when an item climbs to it."""

    tier: str = Field(description="Tier name, e.g. `chem.fast`.")
    config: dict[str, Any] = Field(
        default_factory=dict, description="Tier config (validated by the tier)."
    )
    gate: str = Field(
        default="true", description="CEL bool expression over earlier verdicts: climb if true."
    )
    group: GroupSelect | None = Field(
        default=None, description="Also require a top rank within the item's group."
    )
    audit_fraction: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Fraction that climbs regardless of gate and group, to audit the tier below.",
    )


class TrajectorySpec(_Strict):
    """How per-step rewards and the outcome reward of a trajectory combine.

    Each step's action climbs the ladder of its own kind (``ladders``), and is rewarded by
    ``reward`` of that kind; the final answer does the same for its kind.
    """

    step_weight: float = Field(default=0.5, ge=0, description="Weight of the step aggregate.")
    outcome_weight: float = Field(default=0.5, ge=0, description="Weight of the outcome reward.")
    step_aggregator: Literal["mean", "min", "last", "discounted"] = Field(
        default="mean", description="How step rewards combine into one number."
    )
    discount: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="For `discounted`: step t weighs discount**t (normalised).",
    )

    @model_validator(mode="after")
    def _some_weight(self) -> TrajectorySpec:
        if self.step_weight == 0 and self.outcome_weight == 0:
            raise ValueError("step_weight and outcome_weight cannot both be 0")
        return self


class BudgetSpec(_Strict):
    """Cost units each tier may spend; when spent, items stop climbing (and the reward says so)."""

    per_job: dict[str, float] = Field(
        default_factory=dict, description="Tier -> cost units one job may spend."
    )
    per_principal_hour: dict[str, float] = Field(
        default_factory=dict, description="Tier -> cost units one principal may spend per hour."
    )


def _policy_error(loc: Loc, msg: str, value: Any) -> InitErrorDetails:
    return {
        "type": PydanticCustomError("policy_error", "{detail}", {"detail": msg}),
        "loc": loc,
        "input": value,
    }


#: What a policy name may be: a slug of at most 64 characters.
POLICY_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"


class PolicyDocument(_Strict):
    """A named escalation policy: ladders per candidate kind, reward composition, budgets."""

    name: str = Field(
        pattern=POLICY_NAME_PATTERN,
        description="Slug: lowercase letters, digits, `.`, `_`, `-`; at most 64 characters.",
    )
    description: str = Field(default="", description="What the policy is for.")
    ladders: dict[CandidateKind, Annotated[list[LadderStep], Field(min_length=1)]] = Field(
        min_length=1, description="Candidate kind -> tiers in climbing order (cheapest first)."
    )
    reward: dict[CandidateKind, RewardSpec] = Field(
        default_factory=dict,
        description="Candidate kind -> reward composition; default: top tier's score.",
    )
    trajectory: TrajectorySpec = Field(
        default_factory=TrajectorySpec, description="How trajectory rewards combine."
    )
    budgets: BudgetSpec = Field(default_factory=BudgetSpec, description="Cost limits per tier.")
    deadline_fallback: Literal["best_available", "infra_error"] = Field(
        default="best_available",
        description="At a job deadline: reward from lower tiers (marked), or infra_error.",
    )

    def ladder_for(self, kind: str) -> list[LadderStep]:
        """The ladder for a candidate kind; PolicyKindError if the policy has none."""
        try:
            return self.ladders[cast(CandidateKind, kind)]
        except KeyError:
            raise PolicyKindError(self.name, kind, sorted(self.ladders)) from None

    def reward_for(self, kind: str) -> RewardSpec:
        """The reward spec for a kind (the default spec when none is given)."""
        self.ladder_for(kind)
        spec = self.reward.get(cast(CandidateKind, kind))
        return spec if spec is not None else _DEFAULT_REWARD

    def tiers(self) -> set[str]:
        """Every tier any ladder uses."""
        return {step.tier for steps in self.ladders.values() for step in steps}

    @model_validator(mode="after")
    def _check_semantics(self, info: ValidationInfo) -> PolicyDocument:
        context = (info.context or {}) if info else {}
        if context.get("skip_semantics"):  # the loader's partial document: checked already
            return self
        known = context.get("known_tiers")
        errors = list(_semantic_errors(self, set(known) if known is not None else None))
        collect = context.get("collect")
        if errors and isinstance(collect, list):  # the loader's salvage: gather, don't raise
            collect.extend((loc, msg) for loc, msg, _ in errors)
        elif errors:
            raise ValidationError.from_exception_data(
                "PolicyDocument", [_policy_error(loc, msg, value) for loc, msg, value in errors]
            )
        return self


_DEFAULT_REWARD = RewardSpec()


class PolicyKindError(LookupError):
    """The policy has no ladder for this candidate kind."""

    def __init__(self, policy: str, kind: str, available: list[str]) -> None:
        super().__init__(
            f"policy {policy!r} has no ladder for kind {kind!r} "
            f"(it has: {', '.join(available) or 'none'})"
        )
        self.policy = policy
        self.kind = kind
        self.available = available


def _expr_error(
    loc: Loc, expr: str, expect: ExpectKind, tiers: list[str], scope: str, kind: str
) -> tuple[Loc, str, Any] | None:
    try:
        check_expr(expr, expect=expect, tiers=tiers, scope=scope, kind=kind)
    except GateCompileError as exc:
        return loc, exc.msg, expr
    return None


def _first_gate(errors: list[tuple[Loc, str, Any]], loc: Loc, step: LadderStep, kind: str) -> None:
    """The first step has no earlier verdicts: its gate may read only item and audit."""
    err = _expr_error(loc, step.gate, "bool", [], "earlier in this ladder", kind)
    if err:
        errors.append(err)
        return
    allowed = {"item", "audit"} | ({"group"} if step.group is not None else set())
    extra = sorted(compile_expr(step.gate, expect="bool").variables - allowed)
    if extra:
        msg = (
            f"the first step's gate may use only {', '.join(sorted(allowed))} "
            f"(there are no earlier verdicts), not {extra[0]!r}"
        )
        errors.append((loc, msg, step.gate))


def _semantic_errors(doc: PolicyDocument, known: set[str] | None) -> list[tuple[Loc, str, Any]]:
    errors: list[tuple[Loc, str, Any]] = []

    def unknown_tier(loc: Loc, tier: str) -> None:
        if known is not None and tier not in known:
            errors.append((loc, unknown_name_message("tier", tier, sorted(known)), tier))

    def expr(
        loc: Loc, text: str, expect: ExpectKind, tiers: list[str], scope: str, kind: str
    ) -> None:
        err = _expr_error(loc, text, expect, tiers, scope, kind)
        if err:
            errors.append(err)

    for kind, steps in doc.ladders.items():
        seen: list[str] = []
        for i, step in enumerate(steps):
            loc: Loc = ("ladders", kind, i)
            unknown_tier((*loc, "tier"), step.tier)
            if step.tier in seen:
                errors.append(
                    ((*loc, "tier"), f"tier {step.tier!r} appears twice in this ladder", step.tier)
                )
            if seen:
                expr((*loc, "gate"), step.gate, "bool", seen, "earlier in this ladder", kind)
            else:
                _first_gate(errors, (*loc, "gate"), step, kind)
            scope = "earlier in this ladder"
            if step.group is not None:
                expr((*loc, "group", "by"), step.group.by, "number", seen, scope, kind)
            seen.append(step.tier)

    for kind, spec in doc.reward.items():
        rloc: Loc = ("reward", kind)
        if kind not in doc.ladders:
            errors.append((rloc, f"no ladder for kind {kind!r}; add `ladders.{kind}` first", kind))
            continue
        ladder = [s.tier for s in doc.ladders[kind]]
        scope = "in this kind's ladder"
        names: set[str] = set()
        for i, comp in enumerate(spec.components):
            cloc: Loc = (*rloc, "components", i)
            if comp.name in names:
                errors.append(
                    ((*cloc, "name"), f"duplicate component name {comp.name!r}", comp.name)
                )
            names.add(comp.name)
            if comp.tier not in ladder:
                errors.append(
                    (
                        (*cloc, "tier"),
                        f"tier {comp.tier!r} is not {scope} (ladder: {', '.join(ladder)})",
                        comp.tier,
                    )
                )
        if spec.components and not any(c.weight > 0 for c in spec.components):
            errors.append(
                ((*rloc, "components"), "at least one component needs a weight > 0", None)
            )
        for i, gate in enumerate(spec.hard_gates):
            expr((*rloc, "hard_gates", i, "when"), gate.when, "bool", ladder, scope, kind)
        for i, penalty in enumerate(spec.penalties):
            expr((*rloc, "penalties", i, "when"), penalty.when, "bool", ladder, scope, kind)

    all_tiers = doc.tiers()
    for field_name in ("per_job", "per_principal_hour"):
        for tier, units in getattr(doc.budgets, field_name).items():
            bloc: Loc = ("budgets", field_name, tier)
            unknown_tier(bloc, tier)
            if tier not in all_tiers:
                errors.append((bloc, f"tier {tier!r} is in no ladder of this policy", tier))
            if units < 0:
                errors.append((bloc, "budget must be >= 0 cost units", units))
    return errors
