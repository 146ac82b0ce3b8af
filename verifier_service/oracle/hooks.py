"""The `oracle` tier wired into the ladder: items sent to an oracle wait for selection in the
ladder's transaction; when they stop waiting (deadline, cancel, capacity) the step's config says
what their reward falls back to and whether a later result revises it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from tiers.oracle import OracleTier
from verifier_service.ladder.deferred import Closing, DeferredWork, register
from verifier_service.ladder.models import Item
from verifier_service.oracle import service


class OracleHandler:
    """The oracle domain as the `oracle` tier's deferred handler."""

    def send(self, session: Session, work: DeferredWork) -> str:
        return service.enqueue(session, work)

    def close(
        self,
        session: Session,
        items: Sequence[Item],
        config: dict[str, Any],
        *,
        cancelled: bool = False,
    ) -> Closing:
        return service.close(session, items, config, cancelled=cancelled)


def install_oracle_tier() -> None:
    """Make the `oracle` tier's work go to the oracle domain in this process."""
    register(OracleTier.name, OracleHandler())
