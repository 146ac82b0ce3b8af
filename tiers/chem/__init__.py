"""Chemistry tiers: chem.fast (RDKit), chem.surrogate (force field, xTB, model), chem.dft."""
