"""chem.fast: RDKit parse and sanitize, element/charge/ring rules, structural alerts, properties.

About a millisecond per molecule. Every property is a verdict component; the score is QED
(times the penalty of alerts configured as penalties) when the molecule passes every rule.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache, partial
from typing import Any, ClassVar

from rdkit import Chem, DataStructs, rdBase
from rdkit.Chem import QED, rdFingerprintGenerator, rdMolDescriptors

from tiers.base import Candidate, Verdict, VerdictStatus, judge_one, stable_json
from tiers.chem.alerts import AlertHit, catalog_hits, compile_smarts
from tiers.chem.fast_config import ChemFastConfig, CustomAlert, parse_config
from tiers.chem.molecule import (
    MAX_SMILES_LENGTH,
    ParsedMolecule,
    candidate_smiles,
    canonical_or_raw,
    fmt,
    parse_smiles,
    reference_smiles,
)


@dataclass
class _Prepared:
    """Everything a config needs at run time, built once per distinct config."""

    config: ChemFastConfig
    allowed: frozenset[int] | None
    disallowed: Chem.Mol | None  # SMARTS query matching any atom not in `allowed`
    required: list[tuple[str, Chem.Mol]]
    custom: list[tuple[CustomAlert, Chem.Mol]]
    fpgen: Any
    reference_fps: list[Any] = field(default_factory=list)


def _query(smarts: str) -> Chem.Mol:
    query = compile_smarts(smarts)
    if query is None:  # the config validators already rejected it
        raise ValueError(f"invalid SMARTS {smarts!r}")
    return query


@cache
def _prepare(config_json: str) -> _Prepared:
    """Validate and compile a config, keyed by its stable JSON (so once per distinct config)."""
    config = parse_config(json.loads(config_json))
    table = Chem.GetPeriodicTable()
    allowed = (
        None
        if config.allowed_elements is None
        else frozenset(table.GetAtomicNumber(s) for s in config.allowed_elements)
    )
    fpgen = rdFingerprintGenerator.GetMorganGenerator(
        radius=config.fingerprint_radius, fpSize=config.fingerprint_size
    )
    refs = [Chem.MolFromSmiles(s) for s in config.reference_smiles]
    return _Prepared(
        config=config,
        allowed=allowed,
        disallowed=None
        if allowed is None
        else Chem.MolFromSmarts("[" + ("&".join(f"!#{z}" for z in sorted(allowed)) or "*") + "]"),
        required=[(s, _query(s)) for s in config.required_substructures],
        custom=[(a, _query(a.smarts)) for a in config.custom_alerts],
        fpgen=fpgen,
        reference_fps=[fpgen.GetFingerprint(m) for m in refs if m is not None],
    )


@cache
def _sascorer() -> Any:
    from rdkit.Contrib.SA_Score import sascorer  # loads its fragment table on first use

    sascorer.readFragmentScores()
    return sascorer


#: Items' own reference molecules kept fingerprinted per process: items carry their own, so an
#: unbounded cache would grow with every new reference a long-running worker sees.
REFERENCE_FP_CACHE = 4096


@lru_cache(maxsize=REFERENCE_FP_CACHE)
def _reference_fp(smiles: str, radius: int, size: int) -> Any:
    if len(smiles) > MAX_SMILES_LENGTH:  # an item's reference: never handed to RDKit
        return None
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return None
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=size)
    return gen.GetFingerprint(mol)


def molecule_properties(mol: Chem.Mol) -> dict[str, float]:
    """The RDKit properties chem.fast reports for a sanitized molecule."""
    qed_props = QED.properties(mol)  # type: ignore[no-untyped-call]  # MW, Crippen logP and TPSA come with it: computed once
    ring_sizes = [len(r) for r in mol.GetRingInfo().AtomRings()]
    centres = Chem.FindMolChiralCenters(  # type: ignore[no-untyped-call]
        mol, includeUnassigned=True, includeCIP=False, useLegacyImplementation=False
    )
    # One pass over the atoms by index: iterating mol.GetAtoms() costs several times more.
    atoms = [mol.GetAtomWithIdx(i) for i in range(mol.GetNumAtoms())]
    charges = [a.GetFormalCharge() for a in atoms]
    mw, logp, tpsa = qed_props.MW, qed_props.ALOGP, qed_props.PSA
    hbd = rdMolDescriptors.CalcNumHBD(mol)
    hba = rdMolDescriptors.CalcNumHBA(mol)
    rotb = rdMolDescriptors.CalcNumRotatableBonds(mol)
    return {
        "heavy_atoms": float(mol.GetNumHeavyAtoms()),
        "mw": float(mw),
        "logp": float(logp),
        "tpsa": float(tpsa),
        "hbd": float(hbd),
        "hba": float(hba),
        "rotatable_bonds": float(rotb),
        "fsp3": float(rdMolDescriptors.CalcFractionCSP3(mol)),
        "rings": float(len(ring_sizes)),
        "aromatic_rings": float(rdMolDescriptors.CalcNumAromaticRings(mol)),
        "min_ring_size": float(min(ring_sizes, default=0)),
        "max_ring_size": float(max(ring_sizes, default=0)),
        "stereocentres": float(len(centres)),
        "unassigned_stereocentres": float(sum(1 for _, label in centres if label == "?")),
        "formal_charge": float(sum(charges)),
        "charged_atoms": float(sum(1 for c in charges if c)),
        "radical_electrons": float(sum(a.GetNumRadicalElectrons() for a in atoms)),
        "qed": float(QED.qed(mol, qedProperties=qed_props)),  # type: ignore[no-untyped-call]
        "sa_score": float(_sascorer().calculateScore(mol)),
        "lipinski_violations": float((mw > 500) + (logp > 5) + (hbd > 5) + (hba > 10)),
        "veber_violations": float((rotb > 10) + (tpsa > 140)),
    }


def _invalid_verdict(parsed: ParsedMolecule) -> Verdict:
    components = {"valid": 0.0, "passed": 0.0}
    if parsed.n_fragments:
        components["fragments"] = float(parsed.n_fragments)
    return Verdict(
        status=VerdictStatus.failed,
        score=0.0,
        components=components,
        feedback=parsed.message,
        reason=parsed.reason,
        tier=ChemFastTier.name,
        tier_version=ChemFastTier.version,
    )


class ChemFastTier:
    """RDKit validity, rules, alerts and properties of a molecule (a few ms)."""

    name: ClassVar[str] = "chem.fast"
    version: ClassVar[str] = "1.0.0"
    queue: ClassVar[str] = "tier.fast"
    cost_class: ClassVar[float] = 0.001
    kinds: ClassVar[frozenset[str]] = frozenset({"molecule"})

    def validate_config(self, config: Mapping[str, Any]) -> None:
        """Raise ValueError with a clear message when `config` is not valid for this tier."""
        parse_config(config)

    def canonical_payload(self, item: Candidate) -> str:
        """Canonical isomeric SMILES of the whole input; the raw stripped text if it won't parse."""
        return canonical_or_raw(candidate_smiles(item))

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        """One verdict per item, in order; bad molecules are failed verdicts, never exceptions."""
        prepared = _prepare(stable_json(dict(config)))
        # RDKit logs every parse error to stderr; capture (and drop) it for the whole batch.
        with rdBase.CaptureErrorLog():
            return [
                judge_one(self.name, self.version, partial(self._verify_one, item, prepared))
                for item in items
            ]

    def warm_up(self) -> None:
        """Load what the first molecule would (the SA fragment table, alert catalogs, the
        default config's compiled rules): about half a second, once per process."""
        self.verify_batch([Candidate(kind="molecule", payload={"smiles": "c1ccccc1O"})], {})

    def _verify_one(self, item: Candidate, prep: _Prepared) -> Verdict:
        cfg = prep.config
        parsed = parse_smiles(
            candidate_smiles(item), max_length=cfg.max_smiles_length, fragments=cfg.fragments
        )
        if parsed.mol is None:
            return _invalid_verdict(parsed)
        mol = parsed.mol
        problems: list[tuple[str, str]] = []  # (reason code, feedback line)
        notes: list[str] = []
        if parsed.n_fragments > 1 and cfg.fragments == "largest":
            notes.append(
                f"The input had {parsed.n_fragments} fragments; only the largest was scored."
            )

        # The disallowed-element query runs in C++; the Python listing only on a hit.
        if prep.disallowed is not None and mol.HasSubstructMatch(prep.disallowed):
            assert prep.allowed is not None
            bad = sorted(
                {a.GetSymbol() for a in mol.GetAtoms() if a.GetAtomicNum() not in prep.allowed}
            )
            if bad:
                problems.append(
                    (
                        "element_not_allowed",
                        f"Element(s) {', '.join(bad)} not allowed; allowed: "
                        f"{', '.join(cfg.allowed_elements or [])}.",
                    )
                )

        components: dict[str, float] = {"valid": 1.0, "fragments": float(parsed.n_fragments)}
        components.update(molecule_properties(mol))

        if components["radical_electrons"] and not cfg.allow_radicals:
            problems.append(
                (
                    "radical",
                    f"The molecule has {int(components['radical_electrons'])} unpaired "
                    "electron(s); radicals are not allowed.",
                )
            )
        if components["charged_atoms"] and not cfg.allow_charged_atoms:
            problems.append(
                (
                    "charged_atoms",
                    f"{int(components['charged_atoms'])} atom(s) carry a formal charge; "
                    "charged atoms are not allowed.",
                )
            )
        if (
            cfg.max_abs_formal_charge is not None
            and abs(components["formal_charge"]) > cfg.max_abs_formal_charge
        ):
            problems.append(
                (
                    "formal_charge",
                    f"Net formal charge {int(components['formal_charge']):+d} exceeds "
                    f"+/-{cfg.max_abs_formal_charge}.",
                )
            )

        # Structural alerts.
        penalty = 1.0
        hits_total = 0
        hit_lines: list[str] = []
        for catalog, action in cfg.alerts.items():
            hits = catalog_hits(catalog, mol)
            components[f"alerts_{catalog.lower()}"] = float(len(hits))
            hits_total += len(hits)
            if not hits:
                continue
            hit_lines.extend(h.describe() for h in hits)
            if action == "filter":
                names = ", ".join(h.name for h in hits)
                problems.append((f"alert:{catalog}", f"{catalog} alert(s) hit: {names}."))
            elif action == "penalty":
                penalty *= cfg.alert_penalty ** len(hits)
        custom_hits = 0
        for alert, query in prep.custom:
            matches = mol.GetSubstructMatches(query)
            if not matches:
                continue
            custom_hits += len(matches)
            atoms = tuple(sorted({a for m in matches for a in m}))
            hit_lines.append(AlertHit(source="custom", name=alert.name, atoms=atoms).describe())
            if alert.action == "filter":
                problems.append(
                    (f"alert:{alert.name}", f"Custom alert '{alert.name}' ({alert.smarts}) hit.")
                )
            else:
                penalty *= alert.penalty ** len(matches)
        components["alerts_custom"] = float(custom_hits)
        components["alerts"] = float(hits_total + custom_hits)
        components["alert_penalty"] = penalty

        missing = [s for s, query in prep.required if not mol.HasSubstructMatch(query)]
        components["substructures_missing"] = float(len(missing))
        if missing:
            problems.append(
                ("missing_substructure", f"Required substructure(s) not found: {missing}.")
            )

        # Similarity to references: the config's and the item's own, one bulk call.
        ref_fps = list(prep.reference_fps)
        for smiles in reference_smiles(item):
            fp = _reference_fp(smiles, cfg.fingerprint_radius, cfg.fingerprint_size)
            if fp is not None:
                ref_fps.append(fp)
        if ref_fps:
            sims = DataStructs.BulkTanimotoSimilarity(prep.fpgen.GetFingerprint(mol), ref_fps)
            components["tanimoto_max"] = float(max(sims))
            components["tanimoto_mean"] = float(math.fsum(sims) / len(sims))

        for comp, bounds in cfg.ranges.items():
            value = components.get(comp)
            if value is None:
                return Verdict(
                    status=VerdictStatus.error,
                    reason="no_reference",
                    feedback=f"The config bounds {comp!r} but no reference molecule was given "
                    "(item reference or config reference_smiles).",
                    components=components,
                    tier=self.name,
                    tier_version=self.version,
                )
            low = bounds.min if bounds.min is not None else -math.inf
            high = bounds.max if bounds.max is not None else math.inf
            if not low <= value <= high:
                problems.append(
                    (
                        f"out_of_range:{comp}",
                        f"{comp} = {fmt(value)} is outside [{fmt(low)}, {fmt(high)}].",
                    )
                )

        summary = (
            f"Canonical SMILES {parsed.smiles}. QED {fmt(components['qed'])}, "
            f"SA {fmt(components['sa_score'])}, MW {fmt(components['mw'])}, "
            f"logP {fmt(components['logp'])}, TPSA {fmt(components['tpsa'])}."
        )
        alert_text = (
            "Structural alerts: " + "; ".join(hit_lines) + "."
            if hit_lines
            else "No structural alerts."
        )
        if problems:
            components["passed"] = 0.0
            feedback = " ".join([*(p[1] for p in problems), *notes, summary, alert_text])
            return Verdict(
                status=VerdictStatus.failed,
                score=0.0,
                components=components,
                feedback=feedback,
                reason=problems[0][0],
                tier=self.name,
                tier_version=self.version,
            )
        components["passed"] = 1.0
        score = components["qed"] * penalty
        if penalty < 1.0:
            notes.append(f"Score QED x alert penalty {fmt(penalty)}.")
        return Verdict(
            status=VerdictStatus.passed,
            score=min(max(score, 0.0), 1.0),
            components=components,
            feedback=" ".join([summary, alert_text, *notes]),
            tier=self.name,
            tier_version=self.version,
        )
