"""Bodies of the console's policy pages' JSON API (the replay report is ladder.replay's)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class PolicyRow(BaseModel):
    """A policy in the console's list."""

    name: str
    active_version: int | None
    versions: int
    latest_version: int | None
    updated_at: datetime | None = Field(description="When the latest version was stored.")


class VersionRow(BaseModel):
    """One stored version of a policy, as the policy page lists it."""

    version: int
    active: bool
    created_by: str
    created_at: datetime


class PolicyDetail(BaseModel):
    """A policy's versions, its active one and the version a roll back would return to."""

    name: str
    active_version: int | None
    rollback_to: int | None = Field(
        description="The version active before the current one (from the audit trail), "
        "else the newest version below the active one; null when there is none."
    )
    versions: list[VersionRow]


DiffKind = Literal["same", "changed", "added", "removed"]


class DiffRow(BaseModel):
    """One row of a side-by-side diff: a line of each version (absent where added/removed)."""

    kind: DiffKind
    left_no: int | None
    left: str | None
    right_no: int | None
    right: str | None


class PolicyDiff(BaseModel):
    """Two versions of a policy side by side, as YAML, line by line."""

    name: str
    a: int
    b: int
    added: int = Field(description="Lines only in version b (or changed in it).")
    removed: int = Field(description="Lines only in version a (or changed in it).")
    rows: list[DiffRow]


class FieldError(BaseModel):
    """One problem in a draft: the field (`ladders.molecule[1].gate`), what, and the line of the
    draft's text it belongs to (null when it has none, e.g. a missing top-level field)."""

    loc: str
    msg: str
    line: int | None


class DraftIn(BaseModel):
    """A draft policy's text (YAML, or JSON)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(max_length=200_000, description="The draft as YAML or JSON text.")


class DraftCheck(BaseModel):
    """Whether a draft validates, and every problem with the line it belongs to."""

    valid: bool
    errors: list[FieldError]


DraftLineKind = Literal["same", "added", "removed"]


class DraftLine(BaseModel):
    """One line of a draft's diff: its number on each side (absent where added or removed)."""

    kind: DraftLineKind
    old_no: int | None
    new_no: int | None
    text: str


class DraftBlock(BaseModel):
    """A run of a draft's diff: lines shown (changes and the lines around them), or unchanged
    lines collapsed out of the way."""

    collapsed: bool
    lines: list[DraftLine]


class DraftDiff(BaseModel):
    """What an operator's draft changes in the version it started from, as written (comments
    and layout kept): unchanged lines away from a change are collapsed."""

    base_version: int
    added: int
    removed: int
    blocks: list[DraftBlock]
