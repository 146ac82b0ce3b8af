"""Registry of tiers by name. Entries are import paths so heavy tiers load only when used."""

from __future__ import annotations

import importlib
from functools import cache

from tiers.base import Tier

# name -> "module:Class". A tier family adds its line here.
TIER_PATHS: dict[str, str] = {
    "schema": "tiers.schema:SchemaTier",
    "chem.fast": "tiers.chem.fast:ChemFastTier",
    "chem.surrogate": "tiers.chem.surrogate:ChemSurrogateTier",
    "chem.dft": "tiers.chem.dft:ChemDftTier",
    "code.sandbox": "tiers.code.sandbox:SandboxTier",
}


class UnknownTierError(LookupError):
    """A tier name that no module provides."""


@cache
def get_tier(name: str) -> Tier:
    """The (cached) tier instance registered under `name`."""
    try:
        path = TIER_PATHS[name]
    except KeyError:
        known = ", ".join(sorted(TIER_PATHS))
        raise UnknownTierError(f"unknown tier {name!r}; known tiers: {known}") from None
    module_name, _, class_name = path.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    tier: Tier = cls()
    return tier


def tier_names() -> list[str]:
    return sorted(TIER_PATHS)
