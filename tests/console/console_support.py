"""What the console tests share: the operator's password, the jobs the service ran."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from support import Service

OPERATOR_PASSWORD = "correct horse battery staple"


def unique_smiles() -> str:
    """A phenol ether with a random chain of 16 C/N atoms: a molecule no other test sends."""
    bits = uuid.uuid4().int
    return "c1ccccc1OC" + "".join("CN"[(bits >> i) & 1] for i in range(16))


@dataclass
class Console:
    """The service, its operator (a person with a password) and the jobs it ran, as the API
    answered them."""

    service: Service
    operator: str
    jobs: list[dict[str, Any]] = field(default_factory=list)
    principals: list[str] = field(default_factory=list)
