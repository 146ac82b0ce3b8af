"""What a CEL gate expression may cost, bounded before it is ever run.

The CEL interpreter has no cost limit of its own, and it holds the GIL while it runs: one
expression of six nested ``map`` comprehensions (a million elements) took 39 s to check and
froze the API meanwhile. Without comprehensions an expression's work is linear in its length;
each comprehension multiplies its body's work by the size of the list or map it walks. So an
expression is refused at validation when it is too long, nests too deeply, nests
comprehensions too deeply, or when an upper bound of its work (below) is too large; at run
time, a comprehension never walks a collection of the item's data larger than
`MAX_COLLECTION` (see `largest_collection`), which keeps the bound true for every item.

The bound: each comprehension's body runs once per element of its range, for every element of
each enclosing comprehension's range; ``map`` and ``filter`` also copy their result so far at
each element (the interpreter's way: measured quadratic), each element as large as the body's
tokens plus the ranges of the lists nested ``map``/``filter`` build. A range written as a list
or map literal has its number of elements, ``verdicts`` `MAX_VERDICTS`; any other range
(``item.metadata.tags``, a concatenation) counts as `MAX_COLLECTION` for each collection it may
join. The work of one run of a body is its number of tokens. An expression's cost is the sum
over its comprehensions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Longest expression accepted, in characters.
MAX_EXPRESSION_CHARS = 4096
#: Deepest nesting of brackets (calls, lists, maps, groups).
MAX_NESTING = 32
#: Deepest nesting of comprehensions (``all``, ``exists``, ``exists_one``, ``map``, ``filter``).
MAX_COMPREHENSION_NESTING = 2
#: Largest list or map of the item's data (metadata, components) a comprehension may walk.
MAX_COLLECTION = 128
#: Most entries of ``verdicts``: one per tier of a ladder, and a ladder's tiers are distinct.
MAX_VERDICTS = 32
#: Largest work bound accepted (0.05-0.15 us of the interpreter's time each, measured): an
#: expression at the limit runs in 30 ms or less.
MAX_COST = 250_000
#: Largest sum of the bounds of one policy's expressions, each counted as often as it is checked.
MAX_DOCUMENT_COST = 4 * MAX_COST

COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "map", "filter"})
#: The comprehensions that build a list: the interpreter copies it at each element, so their
#: work grows with the square of their range.
BUILDERS = frozenset({"map", "filter"})

_TOKEN = re.compile(
    r"""(?P<str>[rRbB]{0,2}(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"
                          |'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
      | (?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[uU]?|0[xX][0-9a-fA-F]+)
      | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op>&&|\|\||==|!=|<=|>=|[-+*/%!<>?:.,()\[\]{}])
      | (?P<space>\s+)
    """,
    re.VERBOSE | re.DOTALL,
)
_OPEN = {"(": ")", "[": "]", "{": "}"}


class GateCostError(ValueError):
    """An expression over one of the limits above; the message names the limit."""


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str


def _tokens(expr: str) -> list[_Token]:
    out: list[_Token] = []
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:  # something the compiler refused already, or will: one opaque token
            out.append(_Token("op", expr[pos]))
            pos += 1
            continue
        kind = m.lastgroup or "op"
        if kind != "space":
            out.append(_Token(kind, m.group()))
        pos = m.end()
    return out


def _matches(tokens: list[_Token]) -> dict[int, int]:
    """Index of each bracket's partner (both ways); unbalanced ones are left out."""
    stack: list[int] = []
    pairs: dict[int, int] = {}
    for i, t in enumerate(tokens):
        if t.kind != "op":
            continue
        if t.text in _OPEN:
            stack.append(i)
        elif t.text in (")", "]", "}") and stack and _OPEN[tokens[stack[-1]].text] == t.text:
            j = stack.pop()
            pairs[i], pairs[j] = j, i
    return pairs


class _Analysis:
    def __init__(self, expr: str) -> None:
        self.tokens = _tokens(expr)
        self.pairs = _matches(self.tokens)

    def is_op(self, i: int, *texts: str) -> bool:
        return (
            0 <= i < len(self.tokens)
            and self.tokens[i].kind == "op"
            and (self.tokens[i].text in texts)
        )

    def comprehension_at(self, i: int) -> tuple[int, int] | None:
        """(open, close) of the arguments of a comprehension whose name is token i."""
        t = self.tokens[i]
        if t.kind != "id" or t.text not in COMPREHENSIONS or not self.is_op(i - 1, "."):
            return None
        if not self.is_op(i + 1, "(") or i + 1 not in self.pairs:
            return None
        return i + 1, self.pairs[i + 1]

    def elements(self, open_: int, close: int) -> int:
        """Top-level elements of a list or map literal."""
        if close == open_ + 1:
            return 0
        count, i = 1, open_ + 1
        while i < close:
            if self.is_op(i, "(", "[", "{") and i in self.pairs:
                i = self.pairs[i]
            elif self.is_op(i, ","):
                count += 1
            i += 1
        return count

    def literal_elements(self, open_: int, close: int) -> int:
        """Elements of every list or map literal between two tokens, at any depth."""
        total = 0
        for i in range(open_ + 1, close):
            if self.is_op(i, "[", "{") and i in self.pairs and self._is_literal(i):
                total += self.elements(i, self.pairs[i])
        return total

    def _is_literal(self, open_: int) -> bool:
        """A `[` or `{` that starts a literal, not an index or a message's fields."""
        before = open_ - 1
        if before < 0:
            return True
        t = self.tokens[before]
        return t.kind == "op" and t.text not in (")", "]", "}")

    def range_bound(self, end: int) -> int:
        """Upper bound of the size of the value whose last token is `end` (a receiver)."""
        if end < 0:
            return MAX_COLLECTION
        t = self.tokens[end]
        if t.kind == "op" and t.text in (")", "]", "}") and end in self.pairs:
            open_ = self.pairs[end]
            if t.text == ")":
                name = open_ - 1
                if self.comprehension_at(name) is not None:  # the result of map or filter
                    return self.range_bound(name - 2)
                if name >= 0 and self.tokens[name].kind == "id":  # a function's result
                    return MAX_COLLECTION
                plus = sum(self.is_op(i, "+") for i in range(open_ + 1, end))
                return MAX_COLLECTION * (1 + plus) + self.literal_elements(open_, end)
            if self._is_literal(open_):
                return self.elements(open_, end)
        if t.kind == "id" and t.text == "verdicts" and not self.is_op(end - 1, "."):
            return MAX_VERDICTS
        return MAX_COLLECTION


@dataclass(frozen=True)
class GateCost:
    """What the analysis found: comprehension count and nesting, and the work bound."""

    comprehensions: int
    nesting: int
    cost: int


def check_cost(expr: str) -> GateCost:
    """Raise GateCostError when `expr` is over a limit; else what it may cost."""
    if len(expr) > MAX_EXPRESSION_CHARS:
        raise GateCostError(
            f"expression is {len(expr)} characters long; the limit is {MAX_EXPRESSION_CHARS}"
        )
    a = _Analysis(expr)
    depth = deepest = 0
    for t in a.tokens:
        if t.kind == "op" and t.text in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
        elif t.kind == "op" and t.text in (")", "]", "}"):
            depth -= 1
    if deepest > MAX_NESTING:
        raise GateCostError(f"brackets nest {deepest} deep; the limit is {MAX_NESTING}")
    found = [(i, span) for i in range(len(a.tokens)) if (span := a.comprehension_at(i))]
    cost = 0
    nesting = 0
    for i, (open_, close) in found:
        enclosing = [(j, o) for j, (o, c) in found if o < open_ and close < c]
        nesting = max(nesting, len(enclosing) + 1)
        if nesting > MAX_COMPREHENSION_NESTING:
            raise GateCostError(
                f"comprehensions ({', '.join(sorted(COMPREHENSIONS))}) nest {nesting} deep; "
                f"the limit is {MAX_COMPREHENSION_NESTING}"
            )
        size = a.range_bound(i - 2)
        outer = 1
        for j, _ in enclosing:
            outer *= a.range_bound(j - 2)
        body = close - open_
        cost += outer * size * body
        if a.tokens[i].text in BUILDERS:
            # Each element of the result is a copy of what the body gave (a list a nested
            # comprehension built, at most), and the result is copied at each element.
            inner = sum(
                a.range_bound(k - 2)
                for k, (o, c) in found
                if open_ < o and c < close and a.tokens[k].text in BUILDERS
            )
            cost += outer * size * size * (body + inner)
    if cost > MAX_COST:
        raise GateCostError(
            f"expression may cost {cost:,} steps (each comprehension's body times the elements "
            f"it walks, {MAX_COLLECTION} for a list or map of the item's data); the limit is "
            f"{MAX_COST:,}"
        )
    return GateCost(comprehensions=len(found), nesting=nesting, cost=cost)


def largest_collection(value: Any) -> int:
    """The number of elements of the largest list or map in `value`, at any depth."""
    if isinstance(value, Mapping):
        inner = max((largest_collection(v) for v in value.values()), default=0)
        return max(len(value), inner)
    if isinstance(value, list | tuple):
        inner = max((largest_collection(v) for v in value), default=0)
        return max(len(value), inner)
    return 0
