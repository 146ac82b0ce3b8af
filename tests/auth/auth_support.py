"""What the auth tests share: a password that passes the rules, and people made with the CLI."""

from __future__ import annotations

import uuid

from support import Service

PASSWORD = "correct horse battery staple"


def new_person(service: Service, role: str) -> str:
    """A new user with `role` and PASSWORD, made with `verifier-service users create`."""
    name = f"{role[:3]}-{uuid.uuid4().hex[:6]}"
    made = service.cli("users", "create", "--role", role, name, stdin=PASSWORD + "\n")
    assert made.returncode == 0, made.stderr
    return name
