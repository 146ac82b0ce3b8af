"""Prompt templates of the judge: sandboxed Jinja2 over a fixed set of namespaces.

A template may read `candidate` (the candidate, fenced), `reference` (the item's reference),
`item.metadata` (the item's metadata) and `rubric` (the step's rubric: `criteria`, `scale`,
`labels`); anything else is refused when the policy is created. The candidate's text reaches
the prompt only inside a fence made for each call (`<candidate-XXXXXXXXXXXX>` ...
`</candidate-XXXXXXXXXXXX>` with 12 random hex digits), and any occurrence of that fence's name
in the text is broken up first, so that a candidate cannot close its block and write
instructions of its own after it.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, meta, nodes
from jinja2.environment import Template
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.sandbox import ImmutableSandboxedEnvironment

NAMESPACES = ("candidate", "reference", "item", "rubric")
#: What a template may read of `item`.
ITEM_FIELDS = ("metadata",)
MAX_TEMPLATE_CHARS = 20_000

_ENV = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


class TemplateProblem(ValueError):
    """A template that does not compile, reads an unknown namespace, or cannot render."""


def check_template(source: str, namespaces: tuple[str, ...] = NAMESPACES) -> None:
    """Raise TemplateProblem if `source` does not compile or reads outside the namespaces."""
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateProblem(f"template is {len(source)} characters; at most {MAX_TEMPLATE_CHARS}")
    try:
        tree = _ENV.parse(source)
    except TemplateSyntaxError as exc:
        raise TemplateProblem(f"does not compile: line {exc.lineno}: {exc.message}") from None
    unknown = sorted(meta.find_undeclared_variables(tree) - set(namespaces))
    if unknown:
        raise TemplateProblem(
            f"reads unknown namespace {', '.join(repr(u) for u in unknown)}; "
            f"a template may read {', '.join(namespaces)} (of item: {', '.join(ITEM_FIELDS)})"
        )
    # `item` only through item.metadata (or item['metadata']): nothing else of it is shown.
    allowed: set[int] = set()
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr):
            target, field = node.node, node.attr
        elif isinstance(node, nodes.Getitem):
            target, field = node.node, str(getattr(node.arg, "value", ""))
        else:
            continue
        if isinstance(target, nodes.Name) and target.name == "item" and field in ITEM_FIELDS:
            allowed.add(id(target))
    for name in tree.find_all(nodes.Name):
        if name.name == "item" and name.ctx == "load" and id(name) not in allowed:
            raise TemplateProblem(
                "reads `item` other than item.metadata; a template may read "
                + ", ".join(f"item.{f}" for f in ITEM_FIELDS)
            )


@lru_cache(maxsize=256)
def compiled(source: str, namespaces: tuple[str, ...] = NAMESPACES) -> Template:
    check_template(source, namespaces)
    return _ENV.from_string(source)


def new_fence() -> str:
    """The name of a fresh candidate fence (unguessable: 48 random bits)."""
    return f"candidate-{secrets.token_hex(6)}"


def fenced(text: str, fence: str) -> str:
    """`text` in a block delimited by `fence`, the fence's name broken up wherever the text has
    it (a zero-width joiner after its first character) so that the block cannot be closed."""
    safe = text.replace(fence, fence[0] + "\u200d" + fence[1:])
    return f"<{fence}>\n{safe}\n</{fence}>"


class CandidateView:
    """What a template sees as `candidate`: the fenced text (`{{ candidate }}` or
    `{{ candidate.text }}`) and the kind; never the bare text."""

    def __init__(self, kind: str, text: str) -> None:
        self.kind = kind
        self.text = text

    def __str__(self) -> str:
        return self.text


def render(
    source: str, context: Mapping[str, Any], namespaces: tuple[str, ...] = NAMESPACES
) -> str:
    """Render a checked template; raise TemplateProblem when it cannot render for this item
    (e.g. it reads a metadata key the item does not have)."""
    try:
        return compiled(source, namespaces).render(**context)
    except (UndefinedError, SecurityError, TypeError, ValueError, ArithmeticError) as exc:
        raise TemplateProblem(f"could not render: {type(exc).__name__}: {exc}") from None
