"""What a gate expression reads about one item at one step (``GateContext`` and its views), the
deterministic audit draw, and the number functions CEL lacks (``abs``, ``min``, ``max``).
Split from gates.py, which compiles and checks the expressions that read these."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import cel

from tiers.base import Verdict
from verifier_service.policies.gate_cost import largest_collection

# --------------------------------------------------------------------------- context


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class VerdictView:
    """What an expression sees of one verdict. Missing or non-finite numbers read as 0.0."""

    status: str
    score: float | None = None
    uncertainty: float | None = None
    components: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_verdict(cls, verdict: Verdict) -> VerdictView:
        return cls(
            status=str(verdict.status),
            score=verdict.score,
            uncertainty=verdict.uncertainty,
            components=verdict.components,
        )

    def discrete(self, name: str) -> str | bool:
        """The value of one of the fields `discrete_values` reads, as `to_cel` gives it."""
        if name == "status":
            return self.status
        if name == "has_score":
            return _finite(self.score) is not None
        if name == "has_uncertainty":
            return _finite(self.uncertainty) is not None
        raise KeyError(name)

    def to_cel(self, components: bool = True) -> dict[str, Any]:
        """The verdict as a CEL map; without `components` when the expression reads none."""
        score = _finite(self.score)
        uncertainty = _finite(self.uncertainty)
        view: dict[str, Any] = {
            "status": self.status,
            "score": 0.0 if score is None else score,
            "uncertainty": 0.0 if uncertainty is None else uncertainty,
            "has_score": score is not None,
            "has_uncertainty": uncertainty is not None,
        }
        if components:
            # Non-finite components are left out: reading one is an error, never a number.
            view["components"] = {
                str(k): float(v)
                for k, v in self.components.items()
                if isinstance(v, int | float) and math.isfinite(v)
            }
        return view


@dataclass(frozen=True, slots=True)
class ItemView:
    """What an expression sees of the item: its kind and its metadata (map<string, dyn>)."""

    kind: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_cel(self) -> dict[str, Any]:
        return {"kind": self.kind, "metadata": _cel_safe(dict(self.metadata))}


@dataclass(frozen=True, slots=True)
class GroupView:
    """Rank of the item in its GRPO group for this step's ``by`` (0 = best); size 1 alone."""

    size: int = 1
    rank: int = 0


def _cel_safe(value: Any) -> Any:
    """Metadata as CEL values: JSON-like data kept, anything else as its string form."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _cel_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cel_safe(v) for v in value]
    return str(value)


@dataclass(frozen=True)
class GateContext:
    """Everything an expression may read about one item at one step. Treat as immutable.

    The CEL environment is built lazily and cached per set of variables an expression reads,
    so evaluating the gate, the group ``by``, penalties and hard gates of one item pays the
    conversion once.
    """

    verdicts: Mapping[str, VerdictView] = field(default_factory=dict)
    item: ItemView = field(default_factory=lambda: ItemView(kind="text"))
    audit: float = 0.0
    group: GroupView = field(default_factory=GroupView)
    _envs: dict[tuple[Any, ...], cel.Context] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def build(
        cls,
        *,
        kind: str,
        verdicts: Mapping[str, Verdict | VerdictView] | None = None,
        metadata: Mapping[str, Any] | None = None,
        audit: float = 0.0,
        group_size: int = 1,
        group_rank: int = 0,
    ) -> GateContext:
        """A context from tier verdicts (``tiers.base.Verdict``) keyed by tier name."""
        views = {
            tier: v if isinstance(v, VerdictView) else VerdictView.from_verdict(v)
            for tier, v in (verdicts or {}).items()
        }
        return cls(
            verdicts=views,
            item=ItemView(kind=kind, metadata=dict(metadata or {})),
            audit=float(audit),
            group=GroupView(size=group_size, rank=group_rank),
        )

    def with_group(self, *, size: int, rank: int) -> GateContext:
        """The same context seen from a group rank (the cached environments are not shared)."""
        return GateContext(
            verdicts=self.verdicts, item=self.item, audit=self.audit,
            group=GroupView(size=size, rank=rank),
        )  # fmt: skip

    def with_audit(self, audit: float) -> GateContext:
        """The same context with another audit draw (one per ladder step)."""
        return GateContext(verdicts=self.verdicts, item=self.item, audit=audit, group=self.group)

    def _variable(self, name: str, tiers: frozenset[str] | None, components: bool) -> Any:
        if name == "verdicts":
            if tiers is None:
                return {t: v.to_cel(components) for t, v in self.verdicts.items()}
            return {t: self.verdicts[t].to_cel(components) for t in tiers if t in self.verdicts}
        if name == "item":
            return self.item.to_cel()
        if name == "audit":
            return float(self.audit)
        if name == "group":
            return {"size": int(self.group.size), "rank": int(self.group.rank)}
        raise KeyError(name)

    def discrete_values(self, reads: tuple[tuple[str, str], ...]) -> tuple[Any, ...]:
        """The values of (tier, field) pairs (see `gates.discrete_reads`): the field's value, or
        for field "" whether the tier has a verdict; None for a field of a tier without one."""
        values: list[Any] = []
        for tier, name in reads:
            view = self.verdicts.get(tier)
            if name == "":
                values.append(view is not None)
            else:
                values.append(None if view is None else view.discrete(name))
        return tuple(values)

    def cel_env(
        self,
        variables: frozenset[str],
        tiers: frozenset[str] | None,
        functions: bool,
        components: bool = True,
        most: int | None = None,
    ) -> cel.Context:
        """The CEL environment with only what an expression reads (conversion is the cost).
        With `most`, a list or map in it larger than that raises CollectionTooLarge (an
        expression that walks collections is bounded by their size: see gate_cost.py)."""
        key = (variables, tiers, functions, components, most)
        env = self._envs.get(key)
        if env is None:
            values = {name: self._variable(name, tiers, components) for name in variables}
            if most is not None:
                for name, value in values.items():
                    if (size := largest_collection(value)) > most:
                        raise CollectionTooLarge(name, size, most)
            env = cel.Context(variables=values, functions=FUNCTIONS if functions else None)
            self._envs[key] = env
        return env


class CollectionTooLarge(ValueError):
    """A variable holds a list or map larger than an expression that walks it may read."""

    def __init__(self, variable: str, size: int, most: int) -> None:
        super().__init__(
            f"{variable} holds a list or map of {size} elements; a gate with comprehensions "
            f"reads collections of at most {most}"
        )


def audit_draw(content_hash: str, step_index: int) -> float:
    """Deterministic uniform draw in [0, 1) for an item (by content hash) at a ladder step."""
    digest = hashlib.sha256(f"audit:{content_hash}:{step_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


# --------------------------------------------------------------------------- functions


def _num(value: Any, fn: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{fn}() takes numbers, got {type(value).__name__}")
    return value


def _abs(x: Any) -> float | int:
    return abs(_num(x, "abs"))


def _min(*xs: Any) -> float | int:
    if not xs:
        raise TypeError("min() needs at least one number")
    return min(_num(x, "min") for x in xs)


def _max(*xs: Any) -> float | int:
    if not xs:
        raise TypeError("max() needs at least one number")
    return max(_num(x, "max") for x in xs)


FUNCTIONS: dict[str, Any] = {"abs": _abs, "min": _min, "max": _max}
