"""The operators' console: server-rendered pages over the service's own JSON (operator role)."""
