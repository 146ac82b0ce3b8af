"""A policy's name and version in a path: shared by the policies API, the ladder's and the
console's routes (so that none imports another's endpoint module)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from verifier_service.policies.schemas import POLICY_NAME_PATTERN

#: A policy's name in a path: a slug (see PolicyDocument.name).
PolicyName = Annotated[str, Path(pattern=POLICY_NAME_PATTERN, description="A policy's name.")]
#: Versions count from 1 and are stored as 32-bit integers.
VersionNumber = Annotated[int, Path(ge=1, le=2**31 - 1, description="A policy version number.")]
