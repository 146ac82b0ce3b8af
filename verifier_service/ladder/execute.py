"""Tier runs: which unique candidates a tier must judge for some items, and judging them.

Both lanes call `execute()`: a tier task (queued lane) and a small waiting request whose
fast-tier work runs in the API's transaction (inline lane).
"""

from __future__ import annotations

import hashlib
import threading
import traceback
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tiers.base import (
    Candidate,
    Verdict,
    VerdictStatus,
    batch_deadline,
    config_hash,
    stable_json,
)
from tiers.registry import get_tier
from verifier_service.ladder.context import group_context, with_context
from verifier_service.ladder.models import Item
from verifier_service.settings import get_settings


def cache_key(tier_name: str, tier_version: str, config: dict[str, object], canonical: str) -> str:
    """Content address of a verdict: tier, its version, its config and the canonical payload."""
    text = "\x1f".join([tier_name, tier_version, config_hash(config), canonical])
    return hashlib.sha256(text.encode()).hexdigest()


def candidate_of(item: Item) -> Candidate:
    return Candidate.model_validate(item.candidate)


def tier_candidate(tier_name: str, item: Item) -> Candidate:
    """The candidate a tier is given: with its trajectory context for a tier that reads it
    (`reads_trajectory`, e.g. a process reward model judging a step with what came before), or
    its group's members for one that ranks a group (`reads_group`)."""
    candidate = candidate_of(item)
    tier = get_tier(tier_name)
    if item.parent_id is not None and getattr(tier, "reads_trajectory", False):
        return with_context(candidate, item)
    if item.group_key is not None and getattr(tier, "reads_group", False):
        return candidate.model_copy(update={"context": group_context(item)})
    return candidate


class _KeyMemo:
    """Cache keys already computed in this process, by a digest of what they depend on.

    A key needs the tier's canonical payload (for molecules an RDKit parse, ~0.1 ms), and a
    trainer resamples the same candidates all the time: a batch answered from the verdict
    cache would spend most of its time re-deriving keys it derived before. Bounded (least
    recently used out); entries are digests, so a large code payload costs no memory here.
    """

    def __init__(self) -> None:
        self._keys: OrderedDict[bytes, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: bytes) -> str | None:
        with self._lock:
            key = self._keys.get(digest)
            if key is not None:
                self._keys.move_to_end(digest)
            return key

    def __len__(self) -> int:
        return len(self._keys)

    def put(self, digest: bytes, key: str, size: int) -> None:
        with self._lock:
            self._keys[digest] = key
            while len(self._keys) > size:
                self._keys.popitem(last=False)


_MEMO = _KeyMemo()


def item_cache_key(tier_name: str, config: dict[str, object], item: Item) -> str:
    """An item's cache key for a tier under a config (the candidate parsed only when this
    process has not derived the key before)."""
    tier = get_tier(tier_name)
    reads_around = getattr(tier, "reads_trajectory", False) or getattr(tier, "reads_group", False)
    if getattr(tier, "cheap_canonical_payload", False) or reads_around:
        # (a tier that reads an item's trajectory or group keys on them too: not memoised by
        # the item's own content)
        # The key is a hash of the candidate's JSON text, as the memo's digest would be: a memo
        # entry would save nothing, and a trainer's one-off tool calls would fill the memo
        # (about 270 bytes each, 65,536 by default) and push out keys that were worth keeping.
        return keyed_candidate(tier_name, config, item)[0]
    candidate = item.candidate
    # What the key is a function of: the tier, its version and config, and the candidate's
    # content (its metadata plays no part in a verdict).
    # (The tier object's identity too: one built anew, e.g. under other settings, starts over.)
    content = (candidate.get(k) for k in ("kind", "payload", "reference"))
    source = [tier.name, tier.version, id(tier), config, *content]
    digest = hashlib.sha256(stable_json(source).encode()).digest()
    key = _MEMO.get(digest)
    if key is None:
        key = keyed_candidate(tier_name, config, item)[0]
        _MEMO.put(digest, key, get_settings().cache_key_memo)
    return key


def keyed_candidate(tier_name: str, config: dict[str, object], item: Item) -> tuple[str, Candidate]:
    """An item's candidate and its cache key for a tier under a config."""
    tier = get_tier(tier_name)
    candidate = tier_candidate(tier_name, item)
    return cache_key(tier.name, tier.version, config, tier.canonical_payload(candidate)), candidate


@dataclass
class TierRun:
    """What a tier must compute: unique candidates by cache key, and who gets what."""

    job_id: str
    tier: str
    kind: str
    step: int
    config: dict[str, object]
    keys: dict[str, str] = field(default_factory=dict)  # item id -> cache key
    candidates: dict[str, Candidate] = field(default_factory=dict)  # cache key -> candidate
    #: The job's deadline (epoch seconds): tiers that wait on something outside stop by it.
    deadline_at: float | None = None

    def add(self, item_id: str, key: str, candidate: Candidate) -> None:
        self.keys[item_id] = key
        self.candidates.setdefault(key, candidate)


def sent_keys(
    tier_name: str, item_ids: Sequence[str], keys: Sequence[str] | None, tier_version: str | None
) -> dict[str, str] | None:
    """The cache keys a tier task's sender derived (`Dispatch.keys`), by item id, when this
    process may take them: one per item, derived under the tier version it runs. None (key the
    items here) for a task sent without keys, or by a process on another version of the tier."""
    if not keys or len(keys) != len(item_ids) or tier_version != get_tier(tier_name).version:
        return None
    return dict(zip(item_ids, keys, strict=True))


def tier_run(
    job_id: str,
    tier_name: str,
    kind: str,
    step: int,
    config: dict[str, object],
    items: Sequence[Item],
    known: Mapping[str, str] | None = None,
    deadline_at: float | None = None,
) -> TierRun:
    """The unique candidates of some items by cache key, and which item gets which verdict;
    `known` keys (by item id, derived by the pass that sent the work) are taken as they are."""
    run = TierRun(job_id, tier_name, kind, step, config, deadline_at=deadline_at)
    known = known or {}
    for item in items:
        key = known.get(item.id) or item_cache_key(tier_name, config, item)
        run.add(item.id, key, tier_candidate(tier_name, item))
    return run


def execute(run: TierRun) -> dict[str, Verdict]:
    """The tier's verdict on each unique candidate of the run, by cache key.

    A crash of the tier becomes error verdicts with its traceback (recorded, never swallowed),
    so the items finish as infra_error instead of being lost.
    """
    keys = list(run.candidates)
    candidates = [run.candidates[k] for k in keys]
    tier = get_tier(run.tier)
    token = batch_deadline.set(run.deadline_at)
    try:
        verdicts = tier.verify_batch(candidates, run.config)
        if len(verdicts) != len(candidates):
            raise RuntimeError(
                f"tier returned {len(verdicts)} verdicts for {len(candidates)} items"
            )
    except Exception as exc:
        text = "".join(traceback.format_exception(exc))[-2000:]
        verdicts = [
            Verdict(
                status=VerdictStatus.error,
                reason=f"tier_crashed: {type(exc).__name__}: {exc}"[:250],
                feedback=text,
                tier=tier.name,
                tier_version=tier.version,
            )
            for _ in candidates
        ]
    finally:
        batch_deadline.reset(token)
    return dict(zip(keys, verdicts, strict=True))
