"""Structural alerts: RDKit FilterCatalogs (built once per process) and operator SMARTS."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal, get_args

from rdkit import Chem
from rdkit.Chem import FilterCatalog

AlertCatalog = Literal["PAINS", "PAINS_A", "PAINS_B", "PAINS_C", "BRENK", "NIH", "ZINC", "CHEMBL"]
ALERT_CATALOGS: tuple[str, ...] = get_args(AlertCatalog)


@dataclass(frozen=True, slots=True)
class AlertHit:
    """One alert matched on a molecule: which catalog, which rule, which atoms."""

    source: str  # catalog name ("PAINS", ...) or "custom"
    name: str
    atoms: tuple[int, ...]

    def describe(self) -> str:
        where = ", ".join(str(a) for a in self.atoms)
        return f"{self.source} alert '{self.name}' at atoms [{where}]"


@cache
def filter_catalog(name: str) -> FilterCatalog.FilterCatalog:
    """The RDKit FilterCatalog for `name`, built once per process (building one takes ~50 ms)."""
    params = FilterCatalog.FilterCatalogParams()
    params.AddCatalog(getattr(FilterCatalog.FilterCatalogParams.FilterCatalogs, name))
    return FilterCatalog.FilterCatalog(params)


def catalog_hits(name: str, mol: Chem.Mol) -> list[AlertHit]:
    """Every entry of catalog `name` that matches `mol`, with the matched atom indices."""
    catalog = filter_catalog(name)
    if not catalog.HasMatch(mol):  # the common case: one C++ call, no Python per entry
        return []
    hits: list[AlertHit] = []
    for entry in catalog.GetMatches(mol):
        atoms: set[int] = set()
        for match in entry.GetFilterMatches(mol):
            atoms.update(pair[1] for pair in match.atomPairs)
        hits.append(AlertHit(source=name, name=entry.GetDescription(), atoms=tuple(sorted(atoms))))
    return hits


@cache
def compile_smarts(smarts: str) -> Chem.Mol | None:
    """A SMARTS query molecule (None when the SMARTS is invalid), cached per process."""
    return Chem.MolFromSmarts(smarts)
