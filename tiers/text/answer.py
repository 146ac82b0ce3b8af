"""The `answer` tier: a text's final answer extracted and compared with the reference.

The item's reference gives what counts as right: `answer` (a string or number; a JSON list is
several acceptable answers, except under `set`/`list` where it is the collection), `answers`
(a list of acceptable answers) and, for `choice`, `choices` (the options' texts in letter
order). The policy step's config (tiers.text.schemas.AnswerConfig) says how to extract and
which comparison mode applies; docs/text-tiers.md gives every rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from functools import partial
from typing import Any, ClassVar

from tiers.base import Candidate, Verdict, VerdictStatus, judge_one, stable_json
from tiers.text.compare import UNIT, Comparison, compare, foreign_digits, nfkc
from tiers.text.extract import Extraction, extract, source_name
from tiers.text.mathpool import MathOutcome, pool_for
from tiers.text.schemas import AnswerConfig, parse_config
from tiers.text.settings import AnswerSettings

#: How a bounded math comparison that did not come back is reported (all scored failures:
#: the answer, not the service, is what made sympy run away).
_MATH_FAILURES = {
    "timeout": ("math_timeout", "comparing it took longer than {limit:g} s and was stopped"),
    "memory": ("math_memory", "comparing it needed more memory than allowed and was stopped"),
    "recursion": ("math_too_deep", "it is nested too deeply to compare"),
    "crashed": ("math_crashed", "the comparison process died on it"),
    "internal": ("math_error", "it could not be compared: {message}"),
}


def _show(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def references_of(item: Candidate, config: AnswerConfig) -> list[str]:
    """The acceptable references of an item as strings (see the module's docstring)."""
    reference = item.reference or {}
    found: list[str] = []
    value = reference.get("answer")
    collection = config.mode in ("set", "list")
    if isinstance(value, list):
        if collection:
            found.append(UNIT.join(str(v) for v in value))
        else:
            found += [str(v) for v in value]
    elif value is not None:
        found.append(str(value))
    for other in reference.get("answers") or []:
        found.append(UNIT.join(str(v) for v in other) if isinstance(other, list) else str(other))
    return found


class AnswerTier:
    """Extracts a `text` item's final answer and compares it with the item's reference."""

    name: ClassVar[str] = "answer"
    version: ClassVar[str] = "1"
    queue: ClassVar[str] = "tier.fast"
    cost_class: ClassVar[float] = 0.0005
    kinds: ClassVar[frozenset[str]] = frozenset({"text"})
    cheap_canonical_payload: ClassVar[bool] = True
    settings_model: ClassVar[type[AnswerSettings]] = AnswerSettings

    def __init__(self, settings: AnswerSettings | None = None) -> None:
        self.settings = settings or AnswerSettings()

    def validate_config(self, config: Mapping[str, Any]) -> None:
        parse_config(AnswerConfig, config)

    def canonical_payload(self, item: Candidate) -> str:
        return stable_json({"payload": item.payload, "reference": item.reference})

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        cfg = AnswerConfig.model_validate(dict(config))

        def one(item: Candidate) -> Verdict:
            return judge_one(self.name, self.version, partial(self._verify, item, cfg))

        threads = min(self.settings.math_processes, len(items))
        if cfg.mode != "math" or threads < 2:
            return [one(item) for item in items]
        # Math comparisons wait on their subprocesses: as many at once as the pool has, so that
        # a batch holding runaways takes about one deadline per pool slot, not one per runaway.
        # (Each verdict's cpu_s is this process's clock over its span, which other threads
        # share; the parent's part is small beside the comparison's, which runs in the child.)
        with ThreadPoolExecutor(threads) as pool:
            return list(pool.map(one, items))

    def _verdict(self, status: VerdictStatus, **fields: Any) -> Verdict:
        if status is VerdictStatus.failed:
            fields.setdefault("score", 0.0)
        return Verdict(status=status, tier=self.name, tier_version=self.version, **fields)

    def _failed(
        self, reason: str, feedback: str, *, found: bool = True, **components: float
    ) -> Verdict:
        # Nothing found: no `correct` component, so that a policy can let people decide (the
        # reward then takes theirs); the verdict's score is 0 all the same.
        base = {"extracted": 0.0, "parsed": 0.0} | ({"correct": 0.0} if found else {})
        return self._verdict(
            VerdictStatus.failed,
            reason=reason,
            feedback=feedback,
            components=base | components,
        )

    def _verify(self, item: Candidate, cfg: AnswerConfig) -> Verdict:
        references = references_of(item, cfg)
        if not references:
            return self._verdict(
                VerdictStatus.error,
                reason="no_reference",
                feedback="the item has no reference answer: give reference.answer "
                "(or reference.answers, a list of acceptable ones)",
            )
        text = str(item.payload.get("text", ""))
        if len(text) > cfg.max_text_chars:
            return self._failed(
                "text_too_long",
                f"the text has {len(text)} characters, more than the {cfg.max_text_chars} "
                "this policy reads; nothing was extracted",
            )
        found = extract(text, cfg)
        if found.problem is not None:
            return self._failed(found.problem, f"no single final answer: {found.detail}")
        if found.answer is None:
            return self._failed("no_answer", self._nothing_found(cfg), found=False)
        answer = found.answer
        where = source_name(found.extractor or "", cfg)
        if len(answer) > cfg.max_answer_chars:
            return self._failed(
                "answer_too_long",
                f"the answer extracted from {where} has {len(answer)} characters, more than "
                f"the {cfg.max_answer_chars} allowed; it was not compared",
                extracted=1.0,
            )
        options = [str(o) for o in (item.reference or {}).get("choices") or []]
        if cfg.mode == "math":
            result = self._math(answer, references, cfg)
            if isinstance(result, Verdict):
                return result
        else:
            result = compare(answer, references, cfg, options)
        return self._judged(found, where, result, references, cfg)

    def _nothing_found(self, cfg: AnswerConfig) -> str:
        places = ", ".join(source_name(e, cfg) for e in cfg.extract)
        thinking = f" outside <{cfg.think_tag}> blocks" if cfg.think_tag else ""
        return f"no final answer found{thinking}: looked for {places}"

    def _math(self, answer: str, references: list[str], cfg: AnswerConfig) -> Comparison | Verdict:
        answer = nfkc(answer)
        if foreign_digits(answer):
            return Comparison(False, False, problem="foreign_digits")
        number = _rational(answer)
        if number is not None:  # whole numbers and fractions of them need no sympy
            expected = [_rational(nfkc(r)) for r in references]
            if all(e is not None for e in expected):
                hits = [i for i, e in enumerate(expected) if e == number]
                return Comparison(True, bool(hits), hits[0] if hits else -1, answer)
        answer, references = _scientific(answer), [_scientific(r) for r in references]
        limit = self.settings.math_timeout_s
        limit = min(cfg.math_timeout_s or limit, limit)
        pool = pool_for(
            self.settings.math_processes,
            self.settings.math_memory_mb,
            self.settings.math_start_timeout_s,
        )
        outcome = pool.compare(answer, references, limit)
        return self._math_result(outcome, answer, limit)

    def _math_result(self, outcome: MathOutcome, answer: str, limit: float) -> Comparison | Verdict:
        if outcome.kind == "ok":
            return Comparison(outcome.parsed, outcome.equal, outcome.index, outcome.shown)
        if outcome.kind == "unavailable":
            return self._verdict(
                VerdictStatus.error, reason="math_unavailable", feedback=outcome.message
            )
        reason, why = _MATH_FAILURES[outcome.kind]
        return self._failed(
            reason,
            f"the answer {_show(answer)} was not accepted: "
            + why.format(limit=limit, message=outcome.message),
            extracted=1.0,
        )

    def _judged(
        self,
        found: Extraction,
        where: str,
        result: Comparison,
        references: list[str],
        cfg: AnswerConfig,
    ) -> Verdict:
        answer = found.answer or ""
        components = {
            "extracted": 1.0,
            "parsed": 1.0 if result.parsed else 0.0,
            "correct": 1.0 if result.equal else 0.0,
            "answer_chars": float(len(answer)),
        }
        shown_refs = " or ".join(_show(r.replace(UNIT, ", "), 40) for r in references[:3])
        if len(references) > 3:
            shown_refs += f" (or {len(references) - 3} more)"
        head = f"extracted {_show(answer)} from {where}"
        if not result.parsed:
            problem = result.problem or "unparsed"
            return self._verdict(
                VerdictStatus.failed,
                score=0.0,
                reason=problem,
                components=components,
                feedback=f"{head}, but it could not be read as {_MODE_NOUN[cfg.mode]} "
                f"({problem.replace('_', ' ')}); reference {shown_refs}",
            )
        if result.equal:
            components["reference_index"] = float(result.reference_index)
            return self._verdict(
                VerdictStatus.passed,
                score=1.0,
                components=components,
                feedback=f"{head}, reference "
                f"{_show(references[result.reference_index].replace(UNIT, ', '), 40)}: "
                f"equal ({cfg.mode})",
            )
        return self._verdict(
            VerdictStatus.failed,
            score=0.0,
            reason="wrong_answer",
            components=components,
            feedback=f"{head} (read as {_show(result.shown)}), reference {shown_refs}: "
            f"not equal ({cfg.mode})",
        )


_MODE_NOUN = {
    "math": "a mathematical expression",
    "numeric": "one number",
    "choice": "exactly one option",
    "exact": "a string",
    "normalized": "a string",
    "set": "a set",
    "list": "a list",
}


def _rational(text: str) -> Fraction | None:
    """A whole number (see `_integer`) or a fraction of two (`\\frac{6}{8}`, `-\\dfrac{1}{2}`,
    `3/4`), exactly; else None. Decimals are left to math-verify and its 6-place rounding."""
    text = text.strip()
    whole = _integer(text)
    if whole is not None:
        return Fraction(whole)
    m = _FRACTION.match(text) if len(text) <= 60 else None
    if m is None:
        return None
    numerator, denominator = int(m["num"] or m["n2"]), int(m["den"] or m["d2"])
    if denominator == 0:
        return None
    value = Fraction(numerator, denominator)
    return -value if m["sign"] else value


def _integer(text: str) -> int | None:
    """A whole number written plainly (`-12`, `1,234`, `12.0`), else None; anything else goes
    to math-verify, which compares decimals after rounding to 6 places."""
    text = text.strip()
    if len(text) > 40 or not _INTEGER.match(text):
        return None
    return int(text.replace(",", "").split(".")[0])


_E_NOTATION = re.compile(r"^\s*(-?(?:[0-9]+\.?[0-9]*|\.[0-9]+))[eE]([-+]?[0-9]{1,4})\s*$", re.ASCII)


def _scientific(text: str) -> str:
    """`1.5e3` as LaTeX (`1.5 \\times 10^{3}`): sympy would read it as 1.5 x e x 3."""
    m = _E_NOTATION.match(text)
    return f"{m[1]} \\times 10^{{{m[2]}}}" if m else text


_FRACTION = re.compile(
    r"^(?P<sign>-)?\s*(?:\\[dt]?frac\{\s*(?P<num>-?[0-9]{1,18})\s*\}\{\s*(?P<den>-?[0-9]{1,18})\s*\}"
    r"|(?P<n2>-?[0-9]{1,18})\s*/\s*(?P<d2>[0-9]{1,18}))$",
    re.ASCII,
)
_INTEGER = re.compile(r"^-?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.0*)?$", re.ASCII)
