"""Answers as JSONL and CSV, streamed (one stored answer per line or row)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from verifier_service.core.db import transaction
from verifier_service.review import repository
from verifier_service.review.models import ReviewAnswer, ReviewTask

FIXED_COLUMNS = [
    "answer_id",
    "task_id",
    "queue",
    "item_id",
    "job_id",
    "reviewer",
    "gold",
    "correct",
    "created_at",
    "comment",
    "steps",
]

#: What a spreadsheet reads as the start of a formula (OWASP's CSV injection list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralised(value: Any) -> Any:
    """A cell a spreadsheet shows as text: a string that would start a formula gets a leading
    `'` (OWASP's advice); numbers, which cannot be formulas, stay numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _record(answer: ReviewAnswer, task: ReviewTask) -> dict[str, Any]:
    return {
        "answer_id": answer.id,
        "task_id": task.id,
        "queue": task.queue,
        "item_id": task.item_id,
        "job_id": task.job_id,
        "reviewer": answer.reviewer,
        "gold": answer.gold,
        "correct": answer.correct,
        "created_at": answer.created_at.isoformat(),
        "comment": answer.comment,
        "steps": answer.steps,
        "values": answer.values,
    }


def _records(queue: str | None) -> Iterator[dict[str, Any]]:
    with transaction() as session:
        for answer, task in repository.export_rows(session, queue):
            yield _record(answer, task)


def jsonl(queue: str | None) -> Iterator[str]:
    """Every answer (of one queue, or all) as one JSON object per line."""
    for record in _records(queue):
        yield json.dumps(record, sort_keys=True) + "\n"


def csv_rows(queue: str | None) -> Iterator[str]:
    """Every answer as CSV: fixed columns, then one `value.<dimension>` column per dimension
    of the queue's rubrics (steps as JSON text). Text that a spreadsheet would take for a
    formula (a comment `=HYPERLINK(...)`) starts with `'`, so it shows as text."""
    records = list(_records(queue))
    dims = sorted({name for r in records for name in r["values"]})
    header = FIXED_COLUMNS + [f"value.{d}" for d in dims]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([neutralised(cell) for cell in header])
    for record in records:
        row = [record[c] if c != "steps" else json.dumps(record[c]) for c in FIXED_COLUMNS]
        row += [record["values"].get(d, "") for d in dims]
        writer.writerow([neutralised(cell) for cell in row])
        if buffer.tell() > 65536:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()
