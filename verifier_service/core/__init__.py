"""Shared infrastructure: database, errors, notifications, logging."""
