"""Celery app and the thin tasks that drive the ladder and the tiers."""
