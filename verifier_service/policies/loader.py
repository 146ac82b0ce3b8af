"""Parse a policy document from YAML, JSON or a mapping, with errors that point at fields."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypedDict, get_args

import yaml
from pydantic import ValidationError

from verifier_service.policies.schemas import PolicyDocument, TransformType

PolicyFormat = Literal["yaml", "json"]

_TRANSFORM_TYPES = frozenset(get_args(TransformType))

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "policies"


class PolicyErrorItem(TypedDict):
    """One problem in a policy document: where (`ladders.molecule[1].gate`) and what."""

    loc: str
    msg: str


class PolicyValidationError(ValueError):
    """A policy document that does not parse or validate; ``errors`` lists every problem."""

    def __init__(self, errors: list[PolicyErrorItem]) -> None:
        self.errors = errors
        lines = [f"{e['loc']}: {e['msg']}" if e["loc"] else e["msg"] for e in errors]
        noun = "problem" if len(errors) == 1 else "problems"
        super().__init__(f"invalid policy ({len(errors)} {noun}):\n" + "\n".join(lines))


def format_loc(loc: Iterable[str | int]) -> str:
    """``("ladders", "molecule", 1, "gate")`` -> ``ladders.molecule[1].gate``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif out:
            out += f".{part}"
        else:
            out = str(part)
    return out


def _clean_loc(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    # Discriminated unions add the tag as a path element: components[0].transform.sigmoid.k
    # reads better without it.
    parts: list[str | int] = []
    for i, part in enumerate(loc):
        if i > 0 and loc[i - 1] == "transform" and part in _TRANSFORM_TYPES:
            continue
        parts.append(part)
    return tuple(parts)


def errors_from_validation(exc: ValidationError) -> list[PolicyErrorItem]:
    """Pydantic errors as ``{"loc", "msg"}`` with human paths and messages."""
    items: list[PolicyErrorItem] = []
    for err in exc.errors(include_url=False):
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field (not allowed here; check the spelling)"
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif msg.startswith("Value error, "):
            msg = msg.removeprefix("Value error, ")
        items.append({"loc": format_loc(_clean_loc(tuple(err["loc"]))), "msg": msg})
    return items


def _parse_text(text: str, fmt: PolicyFormat | None) -> Any:
    if fmt == "json" or (fmt is None and text.lstrip().startswith(("{", "["))):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise PolicyValidationError(
                [
                    {
                        "loc": "",
                        "msg": f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                    }
                ]
            ) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise PolicyValidationError(
            [{"loc": "", "msg": f"invalid YAML{where}: {problem}"}]
        ) from exc


def parse_policy(
    source: str | bytes | Mapping[str, Any],
    *,
    fmt: PolicyFormat | None = None,
    known_tiers: Iterable[str] | None = None,
) -> PolicyDocument:
    """Parse and validate a policy; raises PolicyValidationError listing every problem.

    ``source`` is YAML or JSON text (``fmt`` None: JSON if it starts with ``{``, else YAML,
    which also reads JSON) or an already-parsed mapping. Tier names are checked against
    ``known_tiers`` when given.
    """
    if isinstance(source, bytes):
        source = source.decode("utf-8")
    data = _parse_text(source, fmt) if isinstance(source, str) else dict(source)
    if not isinstance(data, Mapping):
        raise PolicyValidationError(
            [{"loc": "", "msg": f"a policy must be a mapping, got {type(data).__name__}"}]
        )
    context = {"known_tiers": set(known_tiers) if known_tiers is not None else None}
    try:
        return PolicyDocument.model_validate(data, context=context)
    except ValidationError as exc:
        raise PolicyValidationError(errors_from_validation(exc)) from exc


def load_policy_file(
    path: str | Path, *, known_tiers: Iterable[str] | None = None
) -> PolicyDocument:
    """Parse a policy file (format from its suffix: .json is JSON, anything else YAML)."""
    path = Path(path)
    fmt: PolicyFormat = "json" if path.suffix == ".json" else "yaml"
    return parse_policy(path.read_text(encoding="utf-8"), fmt=fmt, known_tiers=known_tiers)


def example_policy_paths() -> list[Path]:
    """The example policies shipped in the repository's top-level ``policies/`` folder."""
    return sorted(EXAMPLES_DIR.glob("*.yaml"))
