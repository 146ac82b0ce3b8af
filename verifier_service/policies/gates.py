"""CEL gate expressions: compile once, type-check at save time, evaluate fast per item.

A gate (or a group ``by``, a penalty, a hard gate) is a CEL expression over four variables:

- ``verdicts``: map tier -> ``{status, score, uncertainty, has_score, has_uncertainty, components}``
- ``item``: ``{kind, metadata}``
- ``audit``: a deterministic uniform draw in [0, 1) for (item, step)
- ``group``: ``{size, rank}``; rank 0 is the best of its group for the step's ``by``

plus the functions ``abs``, ``min`` and ``max`` (CEL has none for numbers). The package
``common-expression-language`` has no static type checker, so an expression is checked by static
analysis of the names it references (variables, functions, tiers) and by evaluating it against
fully populated sample contexts of the right shape; the result must have the expected type.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import cel

# The context and its views live in gate_context.py, what an expression reads of them in
# gate_reads.py; importers of gates.py keep finding them here.
from verifier_service.policies.gate_context import FUNCTIONS, CollectionTooLarge, VerdictView
from verifier_service.policies.gate_context import GateContext as GateContext
from verifier_service.policies.gate_context import GroupView as GroupView
from verifier_service.policies.gate_context import ItemView as ItemView
from verifier_service.policies.gate_context import audit_draw as audit_draw
from verifier_service.policies.gate_cost import (
    MAX_COLLECTION,
    MAX_DOCUMENT_COST,
    GateCostError,
    check_cost,
)
from verifier_service.policies.gate_reads import (
    discrete_reads,
    named_keys,
    reads_components,
    referenced_tiers,
)

ExpectKind = Literal["bool", "number"]

ROOT_VARIABLES: tuple[str, ...] = ("verdicts", "item", "audit", "group")
VERDICT_FIELDS: tuple[str, ...] = (
    "status",
    "score",
    "uncertainty",
    "has_score",
    "has_uncertainty",
    "components",
)
STATUSES: tuple[str, ...] = ("passed", "failed", "error", "pending")

# CEL standard functions and type identifiers this package's interpreter understands.
_CEL_FUNCTIONS = frozenset(
    {
        "size", "int", "uint", "double", "string", "bool", "bytes", "type", "dyn", "has",
        "matches", "contains", "startsWith", "endsWith", "timestamp", "duration",
        "getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek",
        "getHours", "getMinutes", "getSeconds", "getMilliseconds",
    }
)  # fmt: skip
_CEL_TYPE_NAMES = frozenset(
    {"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"}
)
_COMPREHENSION_VAR = re.compile(
    r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,"
)


class GateCompileError(ValueError):
    """A CEL expression that does not compile or does not type-check; ``msg`` says why."""

    def __init__(self, msg: str, *, expression: str = "") -> None:
        super().__init__(msg)
        self.msg = msg
        self.expression = expression


class GateEvaluationError(RuntimeError):
    """A compiled expression failed on a real context (missing key, wrong type, ...)."""

    def __init__(self, expression: str, cause: BaseException | str) -> None:
        detail = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        super().__init__(f"gate expression {expression!r} failed: {detail}")
        self.expression = expression
        self.cause = cause


ALLOWED_FUNCTIONS = _CEL_FUNCTIONS | frozenset(FUNCTIONS)


# --------------------------------------------------------------------------- compile


_UNKNOWN = object()
#: Distinct inputs remembered per expression (statuses of a few tiers: a handful in practice).
_MEMO_SIZE = 1024


@dataclass(frozen=True, slots=True)
class CompiledExpr:
    """A compiled CEL expression. ``tiers`` is None when it reads ``verdicts`` dynamically."""

    source: str
    expect: ExpectKind
    program: Any = field(repr=False)
    variables: frozenset[str]
    tiers: frozenset[str] | None
    uses_functions: bool
    #: Tiers the expression names literally (``verdicts['x']``, ``'x' in verdicts``).
    named_tiers: frozenset[str] = frozenset()
    #: The value of an expression that reads no variable (``true``), found once at compile
    #: time: a ladder's default gate costs no CEL environment per item.
    constant: tuple[Any] | None = None
    #: False when it reads no verdict's components (see `reads_components`).
    components: bool = True
    #: For an expression that reads nothing but a few verdict statuses (`discrete_reads`):
    #: what it reads, and its values so far by what it read. The usual hard gate
    #: (``verdicts['chem.fast'].status == 'passed'``) then costs a CEL environment (about
    #: 20 us) only for the first item of each status, not for every item.
    discrete: tuple[tuple[str, str], ...] | None = None
    memo: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False, compare=False)
    #: Whether it has comprehensions: then the collections it reads are bounded in size
    #: (gate_cost.MAX_COLLECTION), which bounds its work.
    walks: bool = False
    #: Upper bound of its work (gate_cost.check_cost).
    cost: int = 0

    def _run(self, ctx: GateContext) -> Any:
        if self.constant is not None:
            return self.constant[0]
        if self.discrete is None:
            return self._execute(ctx)
        read = ctx.discrete_values(self.discrete)
        found = self.memo.get(read, _UNKNOWN)
        if found is _UNKNOWN:
            found = self._execute(ctx)  # an error is raised every time, not remembered
            if len(self.memo) < _MEMO_SIZE:
                self.memo[read] = found
        return found

    def _execute(self, ctx: GateContext) -> Any:
        most = MAX_COLLECTION if self.walks else None
        try:
            env = ctx.cel_env(
                self.variables, self.tiers, self.uses_functions, self.components, most
            )
        except CollectionTooLarge as exc:
            raise GateEvaluationError(self.source, str(exc)) from exc
        try:
            return self.program.execute(env)
        except Exception as exc:  # the interpreter raises KeyError/TypeError/RuntimeError/...
            raise GateEvaluationError(self.source, exc) from exc

    def evaluate_bool(self, ctx: GateContext) -> bool:
        """The expression's truth value on ``ctx``; anything but a bool is an error."""
        result = self._run(ctx)
        if not isinstance(result, bool):
            raise GateEvaluationError(self.source, f"expected bool, got {type(result).__name__}")
        return result

    def evaluate_number(self, ctx: GateContext) -> float:
        """The expression's numeric value on ``ctx``; non-numbers and NaN are errors."""
        result = self._run(ctx)
        if isinstance(result, bool) or not isinstance(result, int | float):
            raise GateEvaluationError(
                self.source, f"expected a number, got {type(result).__name__}"
            )
        value = float(result)
        if math.isnan(value):
            raise GateEvaluationError(self.source, "expression evaluated to NaN")
        return value


def _syntax_message(exc: Exception) -> str:
    text = str(exc)
    # "Failed to parse expression '...': ERROR: <input>:1:4: Syntax error: ...\n| src\n| ...^"
    m = re.search(r"<input>:(\d+):(\d+):\s*(.*)", text, flags=re.DOTALL)
    if m:
        first, _, rest = m.group(3).partition("\n")
        caret = "\n".join(line for line in rest.splitlines() if line.startswith("|"))
        detail = f"syntax error at line {m.group(1)}, column {m.group(2)}: {first.strip()}"
        return f"{detail}\n{caret}" if caret else detail
    return f"syntax error: {text}"


@lru_cache(maxsize=4096)
def _compile_cached(expr: str, expect: ExpectKind) -> CompiledExpr:
    if not expr.strip():
        raise GateCompileError("empty expression", expression=expr)
    try:
        cost = check_cost(expr)  # before anything runs it, the compiler included
    except GateCostError as exc:
        raise GateCompileError(str(exc), expression=expr) from None
    try:
        program = cel.compile(expr)
    except Exception as exc:
        raise GateCompileError(_syntax_message(exc), expression=expr) from exc
    bound = set(_COMPREHENSION_VAR.findall(expr))
    names = set(program.variables()) - bound - _CEL_TYPE_NAMES
    unknown = sorted(names - set(ROOT_VARIABLES))
    if unknown:
        raise GateCompileError(
            unknown_name_message("variable", unknown[0], ROOT_VARIABLES), expression=expr
        )
    functions = {f for f in program.functions() if f[:1].isalpha()}
    bad_functions = sorted(functions - ALLOWED_FUNCTIONS)
    if bad_functions:
        raise GateCompileError(
            unknown_name_message("function", bad_functions[0], sorted(ALLOWED_FUNCTIONS)),
            expression=expr,
        )
    tiers, all_literal = referenced_tiers(expr)
    constant: tuple[Any] | None = None
    if not names and not functions:
        try:
            constant = (program.execute(cel.Context(variables={})),)
        except Exception:  # an error it raises each time it runs: left to run time, with context
            constant = None
    return CompiledExpr(
        source=expr,
        expect=expect,
        program=program,
        variables=frozenset(names),
        tiers=tiers if all_literal else None,
        uses_functions=bool(functions & set(FUNCTIONS)),
        named_tiers=tiers,
        constant=constant,
        components=reads_components(expr),
        discrete=discrete_reads(expr) if names == {"verdicts"} and not functions else None,
        walks=cost.comprehensions > 0,
        cost=cost.cost,
    )


def unknown_name_message(what: str, name: str, known: Iterable[str]) -> str:
    known = list(known)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f"; known: {', '.join(known)}"
    return f"unknown {what} {name!r}{hint}"


def compile_expr(expr: str, *, expect: ExpectKind) -> CompiledExpr:
    """Compile (LRU-cached by text) and check names; raises GateCompileError.

    Checks syntax, unknown variables and unknown functions. Types are checked by
    :func:`check_expr`, which also needs to know which tiers the expression may read.
    """
    return _compile_cached(expr, expect)


def _sample_contexts(
    expr: str, tiers: Sequence[str], kind: str, metadata_value: Any
) -> list[GateContext]:
    literals = named_keys(expr)
    components = dict.fromkeys(literals, 0.5)
    metadata = dict.fromkeys(literals, metadata_value)
    shapes = [
        ("passed", 0.7, 0.1, 0.25, 0, 4),
        ("failed", 0.2, 0.3, 0.75, 3, 4),
        ("error", None, None, 0.999, 0, 1),
    ]
    return [
        GateContext.build(
            kind=kind,
            verdicts={
                t: VerdictView(status=s, score=sc, uncertainty=u, components=components)
                for t in tiers
            },
            metadata=metadata,
            audit=audit,
            group_size=size,
            group_rank=rank,
        )
        for s, sc, u, audit, rank, size in shapes
    ]


def check_expr(
    expr: str,
    *,
    expect: ExpectKind,
    tiers: Sequence[str],
    scope: str = "earlier in this ladder",
    kind: str = "text",
) -> CompiledExpr:
    """Compile and type-check ``expr`` as it will run: only ``tiers`` may be read.

    Raises GateCompileError naming the first problem: syntax, unknown variable or function, a
    tier outside ``tiers``, a type error, or a result of the wrong type.
    """
    compiled = compile_expr(expr, expect=expect)
    _spend(compiled)
    outside = sorted(compiled.named_tiers - set(tiers))
    if outside:
        where = ", ".join(tiers) if tiers else "none"
        raise GateCompileError(
            f"refers to tier {outside[0]!r}, which is not {scope} (tiers it may read: {where})",
            expression=expr,
        )
    # metadata is map<string, dyn>: accept the expression if some typing of it works.
    first_error: str | None = None
    for metadata_value in (1.0, "x", True, ["x"], [1.0]):
        error = None
        for ctx in _sample_contexts(expr, tiers, kind, metadata_value):
            try:
                if expect == "bool":
                    compiled.evaluate_bool(ctx)
                else:
                    compiled.evaluate_number(ctx)
            except GateEvaluationError as exc:
                error = _type_message(exc, expect)
                break
        if error is None:
            return compiled
        first_error = first_error or error
    raise GateCompileError(first_error or "does not type-check", expression=expr)


#: What the expressions of the document being checked may still cost (see `document_budget`).
_BUDGET: ContextVar[list[int] | None] = ContextVar("gate_budget", default=None)


@contextmanager
def document_budget(most: int = MAX_DOCUMENT_COST) -> Iterator[None]:
    """Bound the work of checking every expression of one document: each check (which runs
    the expression on sample contexts) spends its expression's cost bound; past `most`, the
    next expression is refused. Without it (a stored policy read back), nothing is counted."""
    token = _BUDGET.set([most])
    try:
        yield
    finally:
        _BUDGET.reset(token)


def _spend(compiled: CompiledExpr) -> None:
    budget = _BUDGET.get()
    if budget is None or compiled.cost == 0:
        return
    budget[0] -= compiled.cost
    if budget[0] < 0:
        raise GateCompileError(
            f"the policy's expressions may cost more than {MAX_DOCUMENT_COST:,} steps in all "
            "(each comprehension's body times the elements it walks); simplify them",
            expression=compiled.source,
        )


def _type_message(exc: GateEvaluationError, expect: ExpectKind) -> str:
    cause = exc.cause
    if isinstance(cause, str):
        want = "a bool (true/false)" if expect == "bool" else "a number"
        return f"must evaluate to {want}: {cause}"
    if isinstance(cause, KeyError):
        return f"reads a key that is not there: {cause}"
    text = str(cause).split(". ")[0]
    return f"type error: {text}"


def select_top(
    scores: Sequence[float], *, top_k: int | None = None, top_fraction: float | None = None
) -> list[bool]:
    """Which members of a group are in its top k (or top fraction, rounded up, at least 1).

    Higher is better; ties go to the lower index; NaN scores are never selected.
    """
    if (top_k is None) == (top_fraction is None):
        raise ValueError("give exactly one of top_k and top_fraction")
    n = len(scores)
    if top_k is not None:
        if top_k < 0:
            raise ValueError("top_k must be >= 0")
        k = top_k
    else:
        assert top_fraction is not None
        if not 0.0 < top_fraction <= 1.0:
            raise ValueError("top_fraction must be in (0, 1]")
        k = max(1, math.ceil(top_fraction * n - 1e-9))
    ranked = group_ranks(scores)
    return [r is not None and r < k for r in ranked]


def group_ranks(scores: Sequence[float]) -> list[int | None]:
    """Rank of each score in its group, 0 = highest; ties by index; NaN gets None."""
    order = sorted(
        (i for i, s in enumerate(scores) if not math.isnan(s)), key=lambda i: (-scores[i], i)
    )
    ranks: list[int | None] = [None] * len(scores)
    for rank, i in enumerate(order):
        ranks[i] = rank
    return ranks


# --------------------------------------------------------------------------- step decisions

ClimbReason = Literal["gate", "audit", "gate_false", "not_top"]


@dataclass(frozen=True, slots=True)
class StepDecision:
    """Whether one item climbs to a step, and why (``audit``: climbed only by sampling)."""

    climb: bool
    reason: ClimbReason
    rank: int | None = None  # rank in the group by the step's ``by``, when it has one


def decide_step(
    contexts: Sequence[GateContext],
    *,
    gate: str,
    audit_fraction: float = 0.0,
    group_by: str | None = None,
    top_k: int | None = None,
    top_fraction: float | None = None,
) -> list[StepDecision]:
    """Decide, for the items of one group that reached a step, which of them climb to it.

    ``contexts`` hold each item's verdicts so far and its audit draw for this step. With a
    group selection, ``by`` ranks all of them (that rank is what ``group.rank`` reads in the
    gate); then the gate filters, and of the items that pass, the top k (or top fraction) by
    ``by`` climb. Independently, an item whose audit draw is below ``audit_fraction`` climbs
    regardless (reason ``audit``), so the tier below can be checked against this one.
    Raises GateEvaluationError when an expression fails on an item.
    """
    gate_expr = compile_expr(gate, expect="bool")
    ranks: list[int | None] = [None] * len(contexts)
    scored = list(contexts)
    keys: list[float] = []
    if group_by is not None:
        by_expr = compile_expr(group_by, expect="number")
        keys = [by_expr.evaluate_number(c) for c in contexts]
        ranks = group_ranks(keys)
        scored = [
            c.with_group(size=len(contexts), rank=r if r is not None else len(contexts))
            for c, r in zip(contexts, ranks, strict=True)
        ]
    passed = [gate_expr.evaluate_bool(c) for c in scored]
    selected = list(passed)
    if group_by is not None:
        idx = [i for i, ok in enumerate(passed) if ok]
        if idx:
            top = select_top([keys[i] for i in idx], top_k=top_k, top_fraction=top_fraction)
            for i, keep in zip(idx, top, strict=True):
                selected[i] = keep
    out: list[StepDecision] = []
    for i, ctx in enumerate(contexts):
        if selected[i]:
            out.append(StepDecision(True, "gate", ranks[i]))
        elif ctx.audit < audit_fraction:
            out.append(StepDecision(True, "audit", ranks[i]))
        else:
            out.append(StepDecision(False, "gate_false" if not passed[i] else "not_top", ranks[i]))
    return out
