"""Parse a policy document from YAML, JSON or a mapping, with errors that point at fields."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
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
    """A policy document that does not parse or validate; ``errors`` lists every problem.

    ``partial`` is the document without the fields those problems name (their defaults in
    their place), when that much validates: later checks (each tier's config) run on it, so
    one save shows every problem, not the first layer of them."""

    def __init__(
        self, errors: list[PolicyErrorItem], partial: PolicyDocument | None = None
    ) -> None:
        self.errors = errors
        self.partial = partial
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
    known = set(known_tiers) if known_tiers is not None else None
    try:
        return PolicyDocument.model_validate(data, context={"known_tiers": known})
    except ValidationError as exc:
        errors = errors_from_validation(exc)
        partial, more = _salvage(data, exc, known)
        seen = {(e["loc"], e["msg"]) for e in errors}
        errors += [e for e in more if (e["loc"], e["msg"]) not in seen]
        raise PolicyValidationError(errors, partial) from exc


#: Rounds of pruning before the salvage gives up (each round removes what the last named).
_SALVAGE_ROUNDS = 6


def _salvage(
    data: Mapping[str, Any], exc: ValidationError, known: set[str] | None
) -> tuple[PolicyDocument | None, list[PolicyErrorItem]]:
    """The problems the first ones hid. Pydantic stops at a model whose fields fail, so a
    misspelt field hides every gate and tier problem of the document (its cross-field checks
    never run). Remove each field a problem names (its default takes its place), validate
    again, and repeat; once it validates, the cross-field problems are collected, not raised.
    A field that cannot be removed (a required one, a list element) ends the salvage there."""
    if all(e["type"] == "policy_error" for e in exc.errors()):
        # Every field validated and the cross-field checks ran already (spending the document's
        # gate budget): the document as it is, without running them twice, is the partial one.
        try:
            skipped = PolicyDocument.model_validate(data, context={"skip_semantics": True})
        except ValidationError:
            return None, []
        return skipped, []
    pruned: dict[str, Any] = copy.deepcopy(dict(data))
    removed: list[tuple[str | int, ...]] = []
    more: list[PolicyErrorItem] = []
    failed = exc
    for _ in range(_SALVAGE_ROUNDS):
        locs = [tuple(e["loc"]) for e in failed.errors(include_url=False)]
        progress = False
        for loc in locs:
            if _prune(pruned, loc):
                removed.append(loc)
                progress = True
        if not progress:
            return None, more
        collected: list[tuple[tuple[str | int, ...], str]] = []
        try:
            document = PolicyDocument.model_validate(
                pruned, context={"known_tiers": known, "collect": collected}
            )
        except ValidationError as again:
            more += [
                e
                for e, raw in zip(errors_from_validation(again), again.errors(), strict=True)
                if not _under_removed(tuple(raw["loc"]), removed)
            ]
            failed = again
            continue
        more += [{"loc": format_loc(loc), "msg": msg} for loc, msg in collected]
        return document, more
    return None, more


def _under_removed(loc: tuple[str | int, ...], removed: list[tuple[str | int, ...]]) -> bool:
    """Whether `loc` is a field the salvage removed (or inside one): its "missing" is ours."""
    return any(loc[: len(r)] == r for r in removed)


def _prune(data: dict[str, Any], loc: Sequence[str | int]) -> bool:
    """Remove the field at `loc` from `data`; False when it cannot go (not there, or a list
    element, whose removal would renumber the problems after it). Parts of `loc` that are not
    in the data (a discriminated union's tag, ``[key]``) are skipped."""
    node: Any = data
    parent: dict[str, Any] | None = None
    key: str | None = None
    for part in loc:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            parent, key, node = node, part, node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            parent, key, node = None, None, node[part]
        elif isinstance(part, str):
            continue  # a union's tag or a dict key's marker: not a level of the data
        else:
            return False
    if parent is None or key is None:
        return False
    del parent[key]
    return True


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
