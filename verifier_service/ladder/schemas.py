"""What the ladder makes of an item: its reward (the wire contract's models, re-exported)."""

from verifier_service.wire.rewards import Reward, RewardCost, RewardStatus

__all__ = ["Reward", "RewardCost", "RewardStatus"]
