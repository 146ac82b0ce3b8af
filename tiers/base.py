"""The Tier protocol and the Verdict type every tier returns."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from enum import StrEnum
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

CandidateKind = Literal["molecule", "code", "json", "text"]


class VerdictStatus(StrEnum):
    """Outcome of one tier on one item."""

    passed = "passed"
    failed = "failed"  # the policy's output is bad: a scored, low result
    error = "error"  # our fault (timeout, crash, not converged): never a reward of 0
    pending = "pending"  # waiting on something outside (people)


class Cost(BaseModel):
    """Resources one verdict consumed."""

    cpu_s: float = 0.0
    wall_s: float = 0.0


class Candidate(BaseModel):
    """One thing a tier judges: kind, payload, optional reference and metadata."""

    model_config = ConfigDict(frozen=True)

    kind: CandidateKind
    payload: dict[str, Any]
    reference: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    #: What the ladder adds for a tier that reads an item's surroundings (`reads_trajectory`):
    #: a trajectory step's earlier steps and observations. Never set by a trainer.
    context: dict[str, Any] | None = None


class TextPayload(BaseModel):
    """The payload of a `text` candidate: free text (judged by people or by a policy's gates)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="The text as the policy wrote it.")


class Verdict(BaseModel):
    """One tier's judgement of one item."""

    status: VerdictStatus
    score: float | None = None
    uncertainty: float | None = None
    components: dict[str, float] = Field(default_factory=dict)
    feedback: str = ""
    reason: str | None = Field(
        default=None, description="Short machine-readable cause for failed/error verdicts"
    )
    cost: Cost = Field(default_factory=Cost)
    tier: str
    tier_version: str
    cached: bool = False


@runtime_checkable
class Tier(Protocol):
    """A verifier stage. Implementations are small classes; heavy imports stay inside methods.

    Optional: `cheap_canonical_payload = True` when `canonical_payload` is plain JSON text of
    the candidate (no parse): its cache keys are then derived anew each time instead of being
    remembered per process (verifier_service.ladder.execute.item_cache_key).
    """

    name: ClassVar[str]
    version: ClassVar[str]
    queue: ClassVar[str]
    cost_class: ClassVar[float]  # cost units charged per verified item
    kinds: ClassVar[frozenset[str]]

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        """Judge every item; one verdict per item, in order. Never raises for bad items."""
        ...

    def canonical_payload(self, item: Candidate) -> str:
        """Canonical text of the item for the content-addressed verdict cache."""
        ...


def missing_package(module: str, extra: str) -> str | None:
    """ "module (extra 'x')" when `module` is not installed (found without importing it), else
    None. For a tier's optional `missing_packages(config)`: what it would need to run `config`
    in this process."""
    if importlib.util.find_spec(module) is not None:
        return None
    return f"{module} (extra '{extra}')"


def stable_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the same value always gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def config_hash(config: Mapping[str, Any]) -> str:
    """Short content hash of a tier config, part of every cache key."""
    return hashlib.sha256(stable_json(dict(config)).encode()).hexdigest()[:16]


class Stopwatch:
    """Measures wall and CPU seconds of a block (process CPU time)."""

    def __init__(self) -> None:
        self.wall_s = 0.0
        self.cpu_s = 0.0

    @contextmanager
    def measure(self) -> Iterator[Stopwatch]:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        try:
            yield self
        finally:
            self.wall_s += time.perf_counter() - wall0
            self.cpu_s += time.process_time() - cpu0

    def cost(self, share: int = 1) -> Cost:
        """The measured cost split evenly over `share` items."""
        share = max(share, 1)
        return Cost(cpu_s=self.cpu_s / share, wall_s=self.wall_s / share)


def judge_one(tier: str, version: str, verify: Callable[[], Verdict]) -> Verdict:
    """One item's verdict, measured and guarded.

    Its cost is this process's wall and CPU time for `verify` plus whatever CPU the verdict
    already reports (a child process's, which this process's clock does not see). An exception
    becomes an error verdict (reason internal_error): a bug never loses the rest of the batch.
    """
    watch = Stopwatch()
    with watch.measure():
        try:
            verdict = verify()
        except Exception as exc:
            verdict = Verdict(
                status=VerdictStatus.error,
                reason="internal_error",
                feedback=f"{tier} failed on this item: {type(exc).__name__}: {exc}",
                tier=tier,
                tier_version=version,
            )
    verdict.cost = Cost(cpu_s=watch.cpu_s + verdict.cost.cpu_s, wall_s=watch.wall_s)
    return verdict


#: When the items of the batch being verified must be answered (epoch seconds), where the
#: caller knows it: the ladder sets it around `verify_batch` from the job's deadline. A tier
#: that waits on something outside (a judge endpoint that is down) waits no longer than this.
batch_deadline: ContextVar[float | None] = ContextVar("batch_deadline", default=None)


def charged_units(cost_class: float, components: Mapping[str, float]) -> float:
    """What one computed verdict costs in cost units: its own `cost_units` component where the
    tier measured it (a judge's tokens at its endpoint's price), else the tier's cost class."""
    units = components.get("cost_units")
    return cost_class if units is None else float(units)
