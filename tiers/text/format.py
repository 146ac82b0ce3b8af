"""The `format` tier: the shape, length and repetition of a text, each a verdict component.

- `shape`: the R1 layout, `<think>...</think>` then exactly one `<answer>...</answer>` and
  nothing after it (tags configurable; the thinking block optional with require_think false).
- `length`: DAPO's soft overlong penalty on characters, whitespace-separated words or the model
  tokens of the policy's tokenizer (`tiers/text/tokens.py`; loaded offline): 0 up to
  max_length - overlong_buffer, then falling linearly to -1 at max_length, -1 beyond.
  Component `length` is 1 + that penalty (in [0, 1]), `length_penalty` the penalty itself.
- `repetition`: the fraction of the text's word n-grams that repeat an earlier one; component
  `repetition` falls linearly from 1 (none) to 0 (at max_repeated_fraction).

The score is the product of the checks' components; the verdict fails when one of them is 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, ClassVar

from tiers.base import Candidate, Verdict, VerdictStatus, judge_one, stable_json
from tiers.text.schemas import FormatConfig, parse_config
from tiers.text.tokens import TokenizerUnavailable, count_tokens, load_tokenizer


def shape_problem(text: str, config: FormatConfig) -> str | None:
    """Why the text is not in the R1 shape, or None when it is."""
    think, answer = re.escape(config.think_tag), re.escape(config.answer_tag)
    opens, closes = len(re.findall(f"<{answer}>", text)), len(re.findall(f"</{answer}>", text))
    if opens != 1 or closes != 1:
        tag = config.answer_tag
        return f"needs exactly one <{tag}> block (found {opens} open, {closes} closed)"
    body = rf"\s*<{answer}>.*?</{answer}>\s*"
    if config.require_think:
        thinks = len(re.findall(f"<{think}>", text)), len(re.findall(f"</{think}>", text))
        if thinks != (1, 1):
            return f"needs exactly one <{config.think_tag}> block before the answer"
        if not re.fullmatch(rf"\s*<{think}>.*?</{think}>" + body, text, re.DOTALL):
            return (
                f"must be <{config.think_tag}>...</{config.think_tag}> then "
                f"<{config.answer_tag}>...</{config.answer_tag}> and nothing else"
            )
    elif not re.fullmatch(rf"(?:(?!<{answer}>).)*" + body, text, re.DOTALL):
        return f"nothing may follow </{config.answer_tag}>"
    return None


def dapo_length_penalty(length: int, max_length: int, buffer: int) -> float:
    """DAPO's soft overlong punishment: 0, then linear down to -1 over the buffer, then -1."""
    if length <= max_length - buffer:
        return 0.0
    if length <= max_length:
        return ((max_length - buffer) - length) / buffer
    return -1.0


def repeated_fraction(text: str, n: int) -> float:
    """Share of the word n-grams that repeat an earlier n-gram (0 for texts shorter than n)."""
    words = text.split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


class FormatTier:
    """Scores a `text` item's layout, length and repetition (see the module's docstring)."""

    name: ClassVar[str] = "format"
    version: ClassVar[str] = "1"
    queue: ClassVar[str] = "tier.fast"
    cost_class: ClassVar[float] = 0.0001
    kinds: ClassVar[frozenset[str]] = frozenset({"text"})
    cheap_canonical_payload: ClassVar[bool] = True

    def validate_config(self, config: Mapping[str, Any]) -> None:
        cfg = parse_config(FormatConfig, config)
        if cfg.tokenizer is not None and cfg.tokenizer_fallback is None:
            try:
                load_tokenizer(cfg.tokenizer)
            except TokenizerUnavailable as exc:
                raise ValueError(
                    f"tokenizer: {exc} (or set tokenizer_fallback: words|chars)"
                ) from None

    def canonical_payload(self, item: Candidate) -> str:
        return stable_json(item.payload)

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        cfg = FormatConfig.model_validate(dict(config))
        return [judge_one(self.name, self.version, partial(self._verify, i, cfg)) for i in items]

    def _verify(self, item: Candidate, cfg: FormatConfig) -> Verdict:
        text = str(item.payload.get("text", ""))
        components: dict[str, float] = {}
        notes: list[str] = []
        score = 1.0
        if "shape" in cfg.checks:
            problem = shape_problem(text, cfg)
            components["shape"] = 0.0 if problem else 1.0
            if problem:
                notes.append(f"shape: {problem}")
        if "length" in cfg.checks:
            unit = cfg.unit
            if unit == "tokens" and cfg.tokenizer is not None:
                try:
                    units = count_tokens(cfg.tokenizer, text)
                except TokenizerUnavailable as exc:
                    if cfg.tokenizer_fallback is None:
                        return Verdict(
                            status=VerdictStatus.error,
                            reason="tokenizer_unavailable",
                            feedback=f"length not counted: {exc}",
                            tier=self.name,
                            tier_version=self.version,
                        )
                    unit = cfg.tokenizer_fallback
                    components["length_fallback"] = 1.0
                    notes.append(f"length counted in {unit} (the policy's fallback): {exc}")
            if unit != "tokens":
                units = len(text) if unit == "chars" else len(text.split())
            penalty = dapo_length_penalty(units, cfg.max_length, cfg.overlong_buffer)
            components |= {"length": 1.0 + penalty, "length_penalty": penalty}
            components["length_units"] = float(units)
            if penalty < 0:
                notes.append(
                    f"length: {units} {unit}, over the {cfg.max_length - cfg.overlong_buffer}"
                    f" where the overlong penalty starts (limit {cfg.max_length}): {penalty:.2f}"
                )
        if "repetition" in cfg.checks:
            fraction = repeated_fraction(text, cfg.ngram)
            components["repeated_fraction"] = fraction
            components["repetition"] = max(0.0, 1.0 - fraction / cfg.max_repeated_fraction)
            if fraction > 0:
                notes.append(f"repetition: {fraction:.0%} of the {cfg.ngram}-grams repeat")
        for check in cfg.checks:
            score *= components[check]
        status = VerdictStatus.passed if score > 0 else VerdictStatus.failed
        return Verdict(
            status=status,
            score=score,
            components=components,
            reason=None if score > 0 else "bad_format",
            feedback="; ".join(notes) or "format ok: " + ", ".join(cfg.checks),
            tier=self.name,
            tier_version=self.version,
        )
