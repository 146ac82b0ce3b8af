"""Operators' view of the registered tiers."""
