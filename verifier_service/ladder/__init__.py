"""The ladder: the state machine that moves items up the tiers and makes their rewards."""
