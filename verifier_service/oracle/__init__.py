"""Oracles: outside systems (labs, markets) as the ladder's deferred `oracle` tier."""
