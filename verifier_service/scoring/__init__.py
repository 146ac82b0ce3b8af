"""Reward composition, REINVENT-style: components -> transforms -> aggregator."""
