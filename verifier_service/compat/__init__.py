"""Endpoints that speak other trainers' reward protocols (OpenRLHF's remote reward model)."""
