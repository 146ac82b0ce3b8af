"""Verifier tiers: the Tier protocol, the Verdict type and one module per tier family."""

from tiers.base import Candidate, Cost, Tier, Verdict, VerdictStatus

__all__ = ["Candidate", "Cost", "Tier", "Verdict", "VerdictStatus"]
