"""Reading a molecule candidate: SMILES -> sanitized RDKit molecule, or why it is not one.

Shared by every chemistry tier so that they agree on what a candidate's molecule is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from rdkit import Chem, rdBase

from tiers.base import Candidate

FragmentPolicy = Literal["keep", "largest", "reject"]

#: Longest SMILES any chemistry tier reads, whatever a policy's max_smiles_length says; the API
#: refuses longer ones. RDKit's canonicaliser recurses once per atom of a chain, about 470 bytes
#: of C stack per character: "C" * 20000 overflows an 8 MiB stack (a segfault), 4096 characters
#: need about 1.9 MiB. Checked on the raw text, before any RDKit call (canonicalising is also
#: superlinear in time: 20,000 characters took seconds to minutes).
MAX_SMILES_LENGTH = 4096

_LOG_STAMP = re.compile(r"^\[\d\d:\d\d:\d\d\] ?", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class ParsedMolecule:
    """Outcome of reading one candidate: a molecule, or a reason code and a message."""

    text: str  # the stripped input text
    mol: Chem.Mol | None = None
    smiles: str = ""  # canonical isomeric SMILES of `mol` (after fragment handling)
    n_fragments: int = 0
    reason: str | None = None
    message: str = ""


def candidate_smiles(item: Candidate) -> str | None:
    """The SMILES text of a molecule candidate, or None when the payload has none."""
    value = item.payload.get("smiles")
    return value if isinstance(value, str) else None


def reference_smiles(item: Candidate) -> list[str]:
    """Reference SMILES of an item (`reference={"smiles": str | list[str]}`)."""
    if not item.reference:
        return []
    value: Any = item.reference.get("smiles")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, str)]
    return []


def _rdkit_messages(text: str) -> str:
    """RDKit's log lines without timestamps, de-duplicated, in order."""
    lines = [line.strip() for line in _LOG_STAMP.sub("", text).splitlines()]
    seen: dict[str, None] = {}
    for line in lines:
        if line:
            seen.setdefault(line, None)
    return "\n".join(seen)


def _parse_message(text: str) -> str:
    with rdBase.CaptureErrorLog() as log:
        Chem.MolFromSmiles(text, sanitize=False)
    return _rdkit_messages(log.messages) or "RDKit could not parse the SMILES."


def largest_fragment(mol: Chem.Mol) -> Chem.Mol:
    """Salt/solvent stripping: the fragment with most heavy atoms.

    Ties go to a fragment with carbon, then to more atoms, then to the first one.
    """
    frags = Chem.GetMolFrags(mol, asMols=True, sanitizeFrags=False)

    def rank(i: int) -> tuple[int, bool, int, int]:
        frag = frags[i]
        has_carbon = any(a.GetAtomicNum() == 6 for a in frag.GetAtoms())
        return (frag.GetNumHeavyAtoms(), has_carbon, frag.GetNumAtoms(), -i)

    best = max(range(len(frags)), key=rank)
    chosen: Chem.Mol = frags[best]
    # Fragments split off unsanitized carry no ring information: descriptors that count rings
    # would raise "RingInfo not initialized" and ring checks would see none. The parent was
    # sanitized, so its fragment sanitizes too; should it not, perceive rings alone.
    try:
        Chem.SanitizeMol(chosen)
    except Exception:  # RDKit raises several exception types
        Chem.FastFindRings(chosen)
    return chosen


def parse_smiles(
    text: str | None, *, max_length: int, fragments: FragmentPolicy = "keep"
) -> ParsedMolecule:
    """Parse and sanitize SMILES; never raises. Failures carry RDKit's own message."""
    if text is None:
        return ParsedMolecule(
            text="",
            reason="invalid_payload",
            message='The candidate has no SMILES: expected payload {"smiles": "<SMILES>"}.',
        )
    text = text.strip()
    if not text:
        return ParsedMolecule(text=text, reason="empty_smiles", message="The SMILES is empty.")
    max_length = min(max_length, MAX_SMILES_LENGTH)
    if len(text) > max_length:
        return ParsedMolecule(
            text=text,
            reason="smiles_too_long",
            message=f"The SMILES has {len(text)} characters; at most {max_length} are accepted.",
        )
    mol = Chem.MolFromSmiles(text, sanitize=False)
    if mol is None:
        return ParsedMolecule(text=text, reason="invalid_smiles", message=_parse_message(text))
    if mol.GetNumAtoms() == 0:
        return ParsedMolecule(text=text, reason="empty_smiles", message="The SMILES has no atoms.")
    try:
        Chem.SanitizeMol(mol)
    except Exception as exc:  # RDKit raises several exception types; the message is what matters
        return ParsedMolecule(
            text=text,
            reason="sanitization_failed",
            message=f"RDKit sanitization failed: {exc}",
        )
    n_fragments = len(Chem.GetMolFrags(mol))
    if n_fragments > 1:
        if fragments == "reject":
            return ParsedMolecule(
                text=text,
                n_fragments=n_fragments,
                reason="disconnected",
                message=f"The SMILES has {n_fragments} disconnected fragments ('.'); "
                "one connected molecule is expected.",
            )
        if fragments == "largest":
            mol = largest_fragment(mol)
    return ParsedMolecule(text=text, mol=mol, smiles=Chem.MolToSmiles(mol), n_fragments=n_fragments)


def canonical_or_raw(text: str | None) -> str:
    """Canonical isomeric SMILES of the whole input; the stripped raw text if it won't parse
    or is longer than MAX_SMILES_LENGTH (too long to hand to RDKit at all)."""
    if text is None:
        return ""
    text = text.strip()
    if len(text) > MAX_SMILES_LENGTH:
        return text
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(text) if text else None
    if mol is None or mol.GetNumAtoms() == 0:
        return text
    return str(Chem.MolToSmiles(mol))


def fmt(value: float) -> str:
    """A number as chemistry feedback shows it: four significant digits."""
    return f"{value:.4g}"
