"""The rows a ladder pass makes, held until the pass writes them all at once."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from tiers.base import Verdict
from verifier_service.core.rows import insert_plain_new, pipelined
from verifier_service.ladder import repository
from verifier_service.ladder.models import CostLedgerEntry, Item, Job, VerdictRecord

#: What a NUL character of a verdict's text is stored (and shown) as.
NUL_SHOWN_AS = "\ufffd"


@dataclass
class PendingWrites:
    """Rows of one pass not yet written: one statement per table when `write` runs, instead of
    one ORM object each."""

    verdicts: list[VerdictRecord] = field(default_factory=list)
    charges: list[CostLedgerEntry] = field(default_factory=list)
    #: Verdicts for the cache, by key.
    cache: dict[str, Verdict] = field(default_factory=dict)
    #: Tier times for stored ledger rows: (step, timed items, riders that cost nothing).
    charge_updates: list[tuple[int, list[repository.ChargeTimes], list[str]]] = field(
        default_factory=list
    )

    def write(self, session: Session) -> None:
        """Write the session's new job and items first, then these rows, which refer to them
        (as do the events and outbox rows written after the pass); and start empty again.

        The items' own changes are not flushed first: they are written once, at commit,
        instead of once here and once more for whatever the pass changes after. The
        statements go together: one round trip on PostgreSQL (a batch's rows go by COPY, a
        round trip per table, instead; see `pipelined`).
        """
        taken = PendingWrites(self.verdicts, self.charges, self.cache, self.charge_updates)
        self.verdicts, self.charges, self.cache, self.charge_updates = [], [], {}, []
        rows = max(len(session.new), len(taken.verdicts), len(taken.charges))
        with session.no_autoflush:
            with pipelined(session, rows):
                written = not session.new or insert_plain_new(session, (Job, Item))
                if written:
                    taken._write_rows(session)
            if session.new:  # other new rows (a callback), or items the INSERT could not take
                session.flush()
            if not written:
                taken._write_rows(session)

    def _write_rows(self, session: Session) -> None:
        repository.put_cache(session, self.cache)
        for record in self.verdicts:
            _storable_text(record)
        repository.insert_verdicts(session, self.verdicts)
        repository.insert_charges(session, self.charges)
        for step, timed, riders in self.charge_updates:
            repository.update_charges(session, step, timed, riders)


def _storable_text(record: VerdictRecord) -> None:
    """A verdict's texts without NUL, which PostgreSQL's text columns refuse: feedback echoes
    what the policy wrote (a SMILES, a payload), and one item's bytes must not fail the
    statement that writes its whole batch. Each NUL becomes U+FFFD, on every database alike."""
    if "\x00" in record.feedback:
        record.feedback = record.feedback.replace("\x00", NUL_SHOWN_AS)
    if record.reason is not None and "\x00" in record.reason:
        record.reason = record.reason.replace("\x00", NUL_SHOWN_AS)
