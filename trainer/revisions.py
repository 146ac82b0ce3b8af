"""Late rewards during a run: after every step the trainer reads the service's changes feed and
logs how many rewards of earlier steps were revised (a lab's result replacing the fallback
reward a job's deadline gave) and by how much. GRPO has already used the first reward of those
completions; the figures show what the lab said of them, step by step."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from verifier_service.client import VerifierClient
from verifier_service.wire.events import RewardChange

PREFIX = "revisions/"


class RevisionLog:
    """Follows the changes feed of this trainer's jobs from the moment it is made."""

    def __init__(self, client: VerifierClient) -> None:
        self.client = client
        self.cursor = "now"
        self.first: dict[tuple[str, int], float | None] = {}
        self.revised_total = 0

    def poll(self) -> dict[str, float]:
        """What changed since the last poll: rewards finished, rewards revised and the mean
        change of a revised reward (its value now minus its first value)."""
        finished, deltas = 0, []
        for change in self._changes():
            key = (change.job_id, change.index)
            value = _value(change.reward)
            if change.revision == 1:
                finished += 1
                self.first[key] = value
                continue
            before = self.first.get(key)
            self.revised_total += 1
            if before is not None and value is not None:
                deltas.append(value - before)
        row = {
            f"{PREFIX}finished": float(finished),
            f"{PREFIX}revised": float(len(deltas)),
            f"{PREFIX}revised_total": float(self.revised_total),
        }
        if deltas:
            row[f"{PREFIX}delta_mean"] = sum(deltas) / len(deltas)
            row[f"{PREFIX}delta_abs_mean"] = sum(abs(d) for d in deltas) / len(deltas)
        return row

    def _changes(self) -> Iterator[RewardChange]:
        # Page by page, keeping the page's cursor: "now" stands for the moment it is asked.
        while True:
            page = self.client.changes(since=self.cursor, limit=500)
            self.cursor = page.next
            if not page.changes:
                return
            yield from page.changes


def _value(reward: dict[str, Any]) -> float | None:
    value = reward.get("value")
    return float(value) if reward.get("status") == "scored" and value is not None else None


def revisions_callback(log: RevisionLog) -> Any:
    from transformers import TrainerCallback

    class Revisions(TrainerCallback):
        """Adds the feed's figures to each log line (before the metrics file writes it)."""

        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:  # noqa: ARG002
            logs = kwargs.get("logs")
            if logs is not None and state.is_world_process_zero:
                logs.update(log.poll())

    return Revisions()
