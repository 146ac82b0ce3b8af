"""What a gate expression reads of ``verdicts``, found from its text without running it.

The compiler (gates.py) uses these to build only what an expression reads: the tiers it names,
whether it reads components, and whether its value depends on nothing but a few statuses.
Split from gates.py."""

from __future__ import annotations

import re
from collections.abc import Iterable

_TIER_INDEX = re.compile(r"""\bverdicts\s*\[\s*(?:'([^'\\]*)'|"([^"\\]*)")\s*\]""")
_TIER_FIELD = re.compile(r"\bverdicts\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()")
_TIER_IN = re.compile(r"""(?:'([^'\\]*)'|"([^"\\]*)")\s+in\s+verdicts\b""")
_VERDICTS_TOKEN = re.compile(r"\bverdicts\b")
_TIER_SCALAR = re.compile(
    r"""\bverdicts\s*(?:\[\s*(?:'[^'\\]*'|"[^"\\]*")\s*\]|\.\s*[A-Za-z_][A-Za-z0-9_]*)"""
    r"\s*\.\s*(?:status|score|uncertainty|has_score|has_uncertainty)\b"
)
_TIER_DISCRETE = re.compile(
    r"""\bverdicts\s*\[\s*(?:'([^'\\]*)'|"([^"\\]*)")\s*\]"""
    r"\s*\.\s*(status|has_score|has_uncertainty)\b"
)
_STRING_LITERAL = re.compile(r"""'([^'\\]*)'|"([^"\\]*)\"""")
_FIELD_AFTER = re.compile(r"\b(?:components|metadata)\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")


def _literal(match: re.Match[str]) -> str:
    return match.group(1) if match.group(1) is not None else match.group(2)


def reads_components(expr: str) -> bool:
    """Whether an expression may read a verdict's components: false only when every use of
    ``verdicts`` is a key test (``'x' in verdicts``) or names a tier and then one of its
    scalar fields (``verdicts['x'].status``), so converting components would be wasted."""
    if "components" in expr:
        return True
    return not _every_use_is(expr, _TIER_SCALAR.finditer(expr))


def _every_use_is(expr: str, reads: Iterable[re.Match[str]]) -> bool:
    """Whether every ``verdicts`` in the expression is the start of one of `reads` (matches
    that begin with it) or the end of a key test (``'x' in verdicts``). Compared by position:
    ``'x' in verdicts['y'].status`` is both kinds of use, and must not count twice."""
    uses = {m.start() for m in _VERDICTS_TOKEN.finditer(expr)}
    known = {m.start() for m in reads}
    known |= {m.end() - len("verdicts") for m in _TIER_IN.finditer(expr)}
    return known == uses


def discrete_reads(expr: str) -> tuple[tuple[str, str], ...] | None:
    """What an expression that reads only ``verdicts`` reads of them, when that is a few values
    of a few kinds: (tier, field) for each ``verdicts['x'].status`` (or ``has_score``,
    ``has_uncertainty``), (tier, "") for each ``'x' in verdicts``. None when any use of
    ``verdicts`` is something else (a score, components, a comprehension): its value may then
    differ for every item."""
    fields = list(_TIER_DISCRETE.finditer(expr))
    reads = {(_literal(m), m.group(3)) for m in fields}
    reads |= {(_literal(m), "") for m in _TIER_IN.finditer(expr)}
    if not reads or not _every_use_is(expr, fields):
        return None
    return tuple(sorted(reads))


def referenced_tiers(expr: str) -> tuple[frozenset[str], bool]:
    """Tier names an expression names literally, and whether every use of ``verdicts`` does."""
    names: set[str] = set()
    literal_uses = 0
    for pattern in (_TIER_INDEX, _TIER_FIELD):
        for m in pattern.finditer(expr):
            names.add(_literal(m) if pattern is _TIER_INDEX else m.group(1))
            literal_uses += 1
    for m in _TIER_IN.finditer(expr):
        names.add(_literal(m))
    all_literal = literal_uses == len(_VERDICTS_TOKEN.findall(expr))
    return frozenset(names), all_literal


def named_keys(expr: str) -> set[str]:
    """Every string literal of an expression and every name read after ``components.`` or
    ``metadata.``: the keys a sample context must hold for the expression to type-check."""
    keys = {_literal(m) for m in _STRING_LITERAL.finditer(expr)}
    keys |= set(_FIELD_AFTER.findall(expr))
    return keys
