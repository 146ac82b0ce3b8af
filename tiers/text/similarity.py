"""The `similarity` tier: OpenAI's string_check and text_similarity graders against the reference.

string_check (`operation`): `eq` / `ne` (exact, case-sensitive), `like` (the reference occurs in
the text, case-sensitive), `ilike` (the same, ignoring case); score 1 or 0.
text_similarity (`metric`): `fuzzy_match` (rapidfuzz's WRatio), `bleu` and `chrf` (sacrebleu's
sentence scores), `rouge_l` (rouge-score's ROUGE-L F-measure), all scaled to [0, 1]; passed at
or above `pass_threshold`. With several references the best one counts.

The metrics' libraries are the `text` extra: they load on first use, so the service starts
without them, and a policy that names a metric without them installed is refused with the fix.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from functools import cache, partial
from typing import Any, ClassVar

from tiers.base import Candidate, Verdict, VerdictStatus, judge_one, stable_json
from tiers.text.extract import strip_thinking
from tiers.text.schemas import SimilarityConfig, parse_config

#: metric -> the module it needs (from the `text` extra).
METRIC_MODULES = {
    "fuzzy_match": "rapidfuzz",
    "bleu": "sacrebleu",
    "chrf": "sacrebleu",
    "rouge_l": "rouge_score",
}


class MissingExtraError(RuntimeError):
    """A metric whose library is not installed."""


def require(metric: str) -> None:
    """Raise MissingExtraError naming the extra when `metric`'s library is missing."""
    module = METRIC_MODULES[metric]
    try:
        importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(
            f"the similarity metric {metric!r} needs {module}, from the `text` extra: "
            "pip install 'verifier-service[server,text]'"
        ) from None


@cache
def _rouge() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def _fuzzy(text: str, reference: str) -> float:
    from rapidfuzz import fuzz

    return float(fuzz.WRatio(text, reference)) / 100.0


def _bleu(text: str, reference: str) -> float:
    import sacrebleu

    return float(sacrebleu.sentence_bleu(text, [reference]).score) / 100.0


def _chrf(text: str, reference: str) -> float:
    import sacrebleu

    return float(sacrebleu.sentence_chrf(text, [reference]).score) / 100.0


def _rouge_l(text: str, reference: str) -> float:
    return float(_rouge().score(reference, text)["rougeL"].fmeasure)


METRICS: dict[str, Callable[[str, str], float]] = {
    "fuzzy_match": _fuzzy,
    "bleu": _bleu,
    "chrf": _chrf,
    "rouge_l": _rouge_l,
}

OPERATIONS: dict[str, Callable[[str, str], bool]] = {
    "eq": lambda text, ref: text == ref,
    "ne": lambda text, ref: text != ref,
    "like": lambda text, ref: ref in text,
    "ilike": lambda text, ref: ref.lower() in text.lower(),
}


def references_of(item: Candidate) -> list[str]:
    reference = item.reference or {}
    value = reference.get("answer")
    found = [str(v) for v in value] if isinstance(value, list) else []
    if value is not None and not isinstance(value, list):
        found.append(str(value))
    found += [str(v) for v in reference.get("answers") or []]
    return found


class SimilarityTier:
    """Compares a `text` item with its reference like OpenAI's string and similarity graders."""

    name: ClassVar[str] = "similarity"
    version: ClassVar[str] = "1"
    queue: ClassVar[str] = "tier.fast"
    cost_class: ClassVar[float] = 0.0001
    kinds: ClassVar[frozenset[str]] = frozenset({"text"})
    cheap_canonical_payload: ClassVar[bool] = True

    def validate_config(self, config: Mapping[str, Any]) -> None:
        cfg = parse_config(SimilarityConfig, config)
        if cfg.metric is not None:
            try:
                require(cfg.metric)
            except MissingExtraError as exc:
                raise ValueError(str(exc)) from None

    def canonical_payload(self, item: Candidate) -> str:
        return stable_json({"payload": item.payload, "reference": item.reference})

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        cfg = SimilarityConfig.model_validate(dict(config))
        return [judge_one(self.name, self.version, partial(self._verify, i, cfg)) for i in items]

    def _verdict(self, status: VerdictStatus, **fields: Any) -> Verdict:
        return Verdict(status=status, tier=self.name, tier_version=self.version, **fields)

    def _verify(self, item: Candidate, cfg: SimilarityConfig) -> Verdict:
        references = references_of(item)
        if not references:
            return self._verdict(
                VerdictStatus.error,
                reason="no_reference",
                feedback="the item has no reference: give reference.answer (or answers)",
            )
        text = str(item.payload.get("text", ""))
        if len(text) > cfg.max_text_chars:
            return self._verdict(
                VerdictStatus.failed,
                score=0.0,
                reason="text_too_long",
                feedback=f"the text has {len(text)} characters, over {cfg.max_text_chars}",
            )
        if cfg.think_tag:
            text = strip_thinking(text, cfg.think_tag)
        text = text.strip()
        if cfg.operation is not None:
            check = OPERATIONS[cfg.operation]
            hits = [check(text, ref) for ref in references]
            # `ne` holds only when the text differs from every reference; the others need one.
            ok = all(hits) if cfg.operation == "ne" else any(hits)
            return self._verdict(
                VerdictStatus.passed if ok else VerdictStatus.failed,
                score=1.0 if ok else 0.0,
                components={"match": 1.0 if ok else 0.0},
                reason=None if ok else "no_match",
                feedback=f"string_check {cfg.operation}: {'holds' if ok else 'does not hold'}",
            )
        metric = cfg.metric or ""
        try:
            require(metric)
        except MissingExtraError as exc:
            return self._verdict(VerdictStatus.error, reason="extra_missing", feedback=str(exc))
        scores = [METRICS[metric](text, ref) for ref in references]
        best = max(scores)
        ok = best >= cfg.pass_threshold
        return self._verdict(
            VerdictStatus.passed if ok else VerdictStatus.failed,
            score=best,
            components={metric: best, "reference_index": float(scores.index(best))},
            reason=None if ok else "below_threshold",
            feedback=f"{metric} {best:.3f} against the closest reference "
            f"({'at or above' if ok else 'below'} the threshold {cfg.pass_threshold:g})",
        )
