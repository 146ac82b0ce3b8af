"""The simulated lab of the recorded lab run (docs/grpo-lab-run.md): a measuring function for
the example partner (docs/examples/oracle_partner.py --measure trainer.lab_sim:measure). It
'measures' a molecule's Crippen logP as RDKit computes it, after LAB_ITEM_DELAY_S seconds (1 by
default), as a slow assay would."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from verifier_service.client import MeasurementFailed


def measure(item: Mapping[str, Any]) -> dict[str, float]:
    from rdkit import Chem, rdBase
    from rdkit.Chem import Crippen

    time.sleep(float(os.environ.get("LAB_ITEM_DELAY_S", "1.0")))
    smiles = str(item["payload"].get("smiles", ""))
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        raise MeasurementFailed(f"the lab could not make {smiles!r}")
    return {"logp": round(float(Crippen.MolLogP(mol)), 3)}  # type: ignore[attr-defined]
