"""The review queue: items people judge (the `human` tier), leases, answers and quality."""
