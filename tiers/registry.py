"""Registry of tiers by name, and the settings each tier family is handed.

Entries are import paths so heavy tiers load only when used. A process that runs tiers hands
each tier family its settings once, at start-up (`configure`); a tier built before that, or in a
process that never configures, gets its settings model's defaults.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Collection, Mapping
from functools import cache
from typing import TypeVar

from pydantic import BaseModel

from tiers.base import Tier

# name -> "module:Class". A tier family adds its line here.
TIER_PATHS: dict[str, str] = {
    "schema": "tiers.schema:SchemaTier",
    "chem.fast": "tiers.chem.fast:ChemFastTier",
    "chem.surrogate": "tiers.chem.surrogate:ChemSurrogateTier",
    "chem.dft": "tiers.chem.dft:ChemDftTier",
    "code.sandbox": "tiers.code.sandbox:SandboxTier",
    "human": "tiers.human:HumanTier",
    "oracle": "tiers.oracle:OracleTier",
    "answer": "tiers.text.answer:AnswerTier",
    "format": "tiers.text.format:FormatTier",
    "similarity": "tiers.text.similarity:SimilarityTier",
    "judge.llm": "tiers.judge.llm:JudgeLlmTier",
    "judge.prm": "tiers.judge.prm:JudgePrmTier",
    "judge.rank": "tiers.judge.rank:JudgeRankTier",
}

# tier family (the part of a tier name before the dot) -> "module:Class" of its settings model.
SETTINGS_PATHS: dict[str, str] = {
    "chem": "tiers.chem.settings:ChemSettings",
    "code": "tiers.code.settings:SandboxSettings",
    "answer": "tiers.text.settings:AnswerSettings",
    "judge": "tiers.judge.settings:JudgeSettings",
    "oracle": "tiers.oracle:OracleSettings",
}

SettingsT = TypeVar("SettingsT", bound=BaseModel)

_configured: dict[str, BaseModel] = {}
_lock = threading.Lock()


class UnknownTierError(LookupError):
    """A tier name that no module provides."""


def _load(path: str) -> type:
    module_name, _, attr = path.partition(":")
    cls: type = getattr(importlib.import_module(module_name), attr)
    return cls


def configure(settings: Mapping[str, BaseModel]) -> None:
    """Hand tier families their settings, e.g. {"code": SandboxSettings(...), "chem": ...}.

    Called once per process at start-up, before tiers are used. Tiers built afterwards (and the
    code sandbox's container pool) take these settings; a family left out gets its model's
    defaults. Raises ValueError for an unknown family or a model of the wrong type.
    """
    for family, value in settings.items():
        if family not in SETTINGS_PATHS:
            known = ", ".join(sorted(SETTINGS_PATHS))
            raise ValueError(f"no tier family {family!r} takes settings; known: {known}")
        model = _load(SETTINGS_PATHS[family])
        if not isinstance(value, model):
            raise ValueError(
                f"settings of tier family {family!r} must be {model.__name__}, "
                f"not {type(value).__name__}"
            )
    with _lock:
        _configured.clear()
        _configured.update(settings)
        get_tier.cache_clear()


def settings_for(family: str, model: type[SettingsT]) -> SettingsT:
    """The settings handed to `family` by `configure`, else `model`'s defaults."""
    with _lock:
        value = _configured.get(family)
    return value if isinstance(value, model) else model()


@cache
def get_tier(name: str) -> Tier:
    """The (cached) tier instance registered under `name`, built with its family's settings."""
    try:
        path = TIER_PATHS[name]
    except KeyError:
        known = ", ".join(sorted(TIER_PATHS))
        raise UnknownTierError(f"unknown tier {name!r}; known tiers: {known}") from None
    cls = _load(path)
    # A tier that takes settings says so with `settings_model`; it is built with its family's.
    model: type[BaseModel] | None = getattr(cls, "settings_model", None)
    if model is None:
        tier: Tier = cls()
    else:
        tier = cls(settings_for(name.partition(".")[0], model))
    return tier


def warm_up(queues: Collection[str]) -> list[str]:
    """Load now what the tiers of `queues` would load on their first item (RDKit's tables,
    compiled alerts): for a process about to take their work, so that its first batch is not
    the slow one. Tiers without a `warm_up` method are left as they are. The names of the tiers
    warmed."""
    warmed = []
    for name, path in sorted(TIER_PATHS.items()):
        if getattr(_load(path), "queue", None) not in queues:
            continue
        warm = getattr(get_tier(name), "warm_up", None)
        if callable(warm):
            warm()
            warmed.append(name)
    return warmed


def tier_names() -> list[str]:
    return sorted(TIER_PATHS)
