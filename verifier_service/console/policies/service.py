"""The console's policy logic: versions side by side, drafts checked with their errors placed on
the lines they belong to, replay of a stored version, activation and roll back (audited).

A draft is a stored, inactive version (POST /v1/policies with activate=false does the same):
it survives restarts, every operator sees it, and what is replayed is exactly what is then
activated. A draft that does not validate is never stored; the editor keeps its text.
"""

from __future__ import annotations

import difflib
import itertools
import re
from typing import Any

import yaml
from sqlalchemy.orm import Session

from verifier_service.auth import service as audit
from verifier_service.console.policies import repository as activations
from verifier_service.console.policies.schemas import (
    DiffKind,
    DiffRow,
    DraftBlock,
    DraftCheck,
    DraftDiff,
    DraftLine,
    FieldError,
    PolicyDetail,
    PolicyDiff,
    PolicyRow,
    VersionRow,
)
from verifier_service.core.errors import ConflictError
from verifier_service.ladder import repository as ladder_repository
from verifier_service.ladder.replay import ReplayReport, replay
from verifier_service.policies import repository as policy_repository
from verifier_service.policies import service as policies
from verifier_service.policies.models import PolicyVersionRecord
from verifier_service.policies.service import InvalidPolicyError


class InvalidDraftError(InvalidPolicyError):
    """A draft that does not validate; `check` has each problem with its line."""

    def __init__(self, check: DraftCheck) -> None:
        super().__init__(
            "the draft policy is invalid",
            errors=[e.model_dump() for e in check.errors],
            hint="fix the fields named in `errors` (each with its line) and save again",
        )
        self.check = check


def rows(session: Session) -> list[PolicyRow]:
    """Every policy with its active and latest versions."""
    out = []
    for policy in policy_repository.list_policies(session):
        versions = policy_repository.list_versions(session, policy.name)
        latest = versions[-1] if versions else None
        out.append(
            PolicyRow(
                name=policy.name,
                active_version=policy.active_version,
                versions=len(versions),
                latest_version=latest.version if latest else None,
                updated_at=latest.created_at if latest else None,
            )
        )
    return out


def detail(session: Session, name: str) -> PolicyDetail:
    """A policy's versions, the active one and where a roll back would go; 404 if none."""
    summary = policies.summary(session, name)  # NotFoundError when there is no such policy
    records = policy_repository.list_versions(session, name)
    versions = [
        VersionRow(
            version=r.version,
            active=r.version == summary.active_version,
            created_by=r.created_by,
            created_at=r.created_at,
        )
        for r in records
    ]
    return PolicyDetail(
        name=name,
        active_version=summary.active_version,
        rollback_to=_rollback_target(session, name, summary.active_version, summary.versions),
        versions=versions,
    )


def _rollback_target(
    session: Session, name: str, active: int | None, versions: list[int]
) -> int | None:
    """The version active before the current one: activations push onto a stack and roll
    backs pop it, read from the audit trail. Without a trail (versions loaded from files at
    start-up are not audited), the newest version below the active one."""
    if active is None:
        return None
    stack: list[int] = []
    for event in activations.activation_events(session, name):
        version = int(event.target.rsplit("@", 1)[1])
        if event.action == "policy.rollback":
            while stack and stack[-1] != version:
                stack.pop()
            if not stack:
                stack.append(version)
        elif event.action == "policy.activate" or event.detail.get("activated"):
            if not stack or stack[-1] != version:
                stack.append(version)
    if len(stack) >= 2 and stack[-1] == active and stack[-2] in versions:
        return stack[-2]
    below = [v for v in versions if v < active]
    return max(below) if below else None


def as_yaml(document: dict[str, Any]) -> str:
    """A stored document as YAML, in its fields' order: what the diff compares."""
    text: str = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
    return text


def editor_text(record: PolicyVersionRecord) -> str:
    """The text a draft starts from: the version's own source (comments kept) when it was
    stored as text, else its document as YAML."""
    return record.source if record.source.strip() else as_yaml(record.document)


def diff(session: Session, name: str, a: int, b: int) -> PolicyDiff:
    """Versions `a` and `b` of a policy side by side, line by line (difflib's matching)."""
    left = as_yaml(policies.stored_version(session, name, a).document).splitlines()
    right = as_yaml(policies.stored_version(session, name, b).document).splitlines()
    out: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.extend(
                DiffRow(kind="same", left_no=i + 1, left=left[i], right_no=j + 1, right=right[j])
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            )
            continue
        pairs = itertools.zip_longest(range(i1, i2), range(j1, j2))
        for i, j in pairs:
            kind: DiffKind = "changed" if i is not None and j is not None else "added"
            if j is None:
                kind = "removed"
            out.append(
                DiffRow(
                    kind=kind,
                    left_no=None if i is None else i + 1,
                    left=None if i is None else left[i],
                    right_no=None if j is None else j + 1,
                    right=None if j is None else right[j],
                )
            )
    return PolicyDiff(
        name=name,
        a=a,
        b=b,
        added=sum(r.right is not None for r in out if r.kind != "same"),
        removed=sum(r.left is not None for r in out if r.kind != "same"),
        rows=out,
    )


#: Unchanged lines shown on each side of a change in a draft's diff; the rest are collapsed.
DRAFT_CONTEXT = 3


def draft_diff(base_version: int, base: str, text: str, context: int = DRAFT_CONTEXT) -> DraftDiff:
    """The operator's draft against the text of the version it started from, line by line as
    written (difflib's matching): a changed line is its old line removed and its new one added;
    unchanged lines more than `context` lines from a change are collapsed into blocks."""
    old, new = base.splitlines(), text.splitlines()
    lines: list[DraftLine] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            lines.extend(
                DraftLine(kind="same", old_no=i + 1, new_no=j + 1, text=new[j])
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            )
            continue
        lines.extend(
            DraftLine(kind="removed", old_no=i + 1, new_no=None, text=old[i]) for i in range(i1, i2)
        )
        lines.extend(
            DraftLine(kind="added", old_no=None, new_no=j + 1, text=new[j]) for j in range(j1, j2)
        )
    changed = [n for n, line in enumerate(lines) if line.kind != "same"]
    shown = {n for c in changed for n in range(c - context, c + context + 1)}
    blocks: list[DraftBlock] = []
    for hidden, run in itertools.groupby(enumerate(lines), key=lambda nl: nl[0] not in shown):
        run_lines = [line for _, line in run]
        if hidden and len(run_lines) == 1:
            hidden = False  # a one-line fold hides nothing worth a click
        if blocks and blocks[-1].collapsed == hidden:
            blocks[-1].lines.extend(run_lines)
        else:
            blocks.append(DraftBlock(collapsed=hidden, lines=run_lines))
    return DraftDiff(
        base_version=base_version,
        added=sum(line.kind == "added" for line in lines),
        removed=sum(line.kind == "removed" for line in lines),
        blocks=blocks,
    )


_LOC_PART = re.compile(r"\[(\d+)\]|([^.\[\]]+)")
_AT_LINE = re.compile(r"\bline (\d+)\b")


def line_of(text: str, loc: str) -> int | None:
    """The line of `text` (1-based) that field `loc` (``ladders.molecule[1].gate``) is on; for a
    field that is missing, the line of the nearest enclosing one that is there."""
    if not loc:
        return None
    try:
        node: yaml.Node | None = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for index, key in _LOC_PART.findall(loc):
        if isinstance(node, yaml.MappingNode) and key:
            found = next((kv for kv in node.value if kv[0].value == key), None)
            if found is None:
                break
            line, node = found[0].start_mark.line + 1, found[1]
        elif isinstance(node, yaml.SequenceNode) and index and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line + 1
        else:
            break
    return line


def check_draft(name: str, text: str) -> DraftCheck:
    """Validate a draft of policy `name` as the policies API would, each problem placed on its
    line of `text`."""
    try:
        document = policies.validate_document(text)
    except InvalidPolicyError as exc:
        errors = []
        for error in exc.extra.get("errors", []):
            loc, msg = str(error["loc"]), str(error["msg"])
            at = _AT_LINE.search(msg) if not loc else None
            line = int(at.group(1)) if at else line_of(text, loc)
            errors.append(FieldError(loc=loc, msg=msg, line=line))
        return DraftCheck(valid=False, errors=errors)
    if document.name != name:
        msg = f"this editor stores versions of {name!r}; the draft is named {document.name!r}"
        return DraftCheck(
            valid=False, errors=[FieldError(loc="name", msg=msg, line=line_of(text, "name"))]
        )
    return DraftCheck(valid=True, errors=[])


def save_draft(session: Session, name: str, text: str, actor: str) -> int:
    """Store a valid draft as a new inactive version (audited); returns its number."""
    check = check_draft(name, text)
    if not check.valid:
        raise InvalidDraftError(check)
    saved = policies.save(session, text, activate=False, created_by=actor)
    audit.record_event(
        session, actor, "policy.create", f"{name}@{saved.version}", activated=False, via="console"
    )
    return saved.version


def activate(session: Session, name: str, version: int, actor: str) -> PolicyDetail:
    """Make a stored version the active one (audited)."""
    before = policies.summary(session, name).active_version
    policies.activate(session, name, version)
    audit.record_event(
        session, actor, "policy.activate", f"{name}@{version}", previous=before, via="console"
    )
    return detail(session, name)


def rollback(session: Session, name: str, actor: str) -> PolicyDetail:
    """Activate the version that was active before the current one (audited)."""
    current = detail(session, name)
    if current.rollback_to is None:
        raise ConflictError(
            f"policy {name!r} has no earlier version to roll back to",
            hint="activate a version by number instead",
        )
    policies.activate(session, name, current.rollback_to)
    audit.record_event(
        session, actor, "policy.rollback", f"{name}@{current.rollback_to}",
        previous=current.active_version,
    )  # fmt: skip
    return detail(session, name)


def replay_version(session: Session, name: str, version: int, limit: int) -> ReplayReport:
    """Replay a stored version over the policy's latest `limit` stored items against the active
    version, from verdicts already known only (the console never spends tier compute)."""
    draft = policies.resolve(session, name, version).document
    active = policies.active_or_none(session, name)
    items = ladder_repository.stored_leaf_items(session, None, name, limit)
    return replay(
        session,
        draft,
        active.document if active else None,
        active.version if active else None,
        items,
        compute_missing=False,
    )
