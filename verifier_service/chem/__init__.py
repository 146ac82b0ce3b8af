"""Chemistry commands of the service CLI (the tiers themselves live in tiers.chem)."""
