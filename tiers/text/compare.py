"""The cheap comparison modes of the `answer` tier: numeric, choice, exact, normalized, set, list.

They run in the calling process: each is linear in the (capped) answer's length. The `math`
mode runs in a bounded subprocess (tiers.text.mathpool).
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from dataclasses import dataclass
from fractions import Fraction

from tiers.text.schemas import AnswerConfig


@dataclass(frozen=True)
class Comparison:
    """How an answer met its references."""

    parsed: bool  # the answer could be read in the mode at all
    equal: bool
    reference_index: int = -1  # which acceptable reference it equals
    shown: str = ""  # the answer as the mode read it, for feedback
    problem: str | None = None  # reason code when not parsed (or parsed but refused)


def foreign_digits(text: str) -> bool:
    """Whether `text` holds a decimal digit that is not 0-9 (Arabic-Indic, Devanagari, ...).

    Callers apply NFKC first, so full-width and mathematical digits have become 0-9 already;
    what is left are other scripts' digits, which `int()` and `\\d` would read as numbers."""
    return any(not ch.isascii() and unicodedata.category(ch) == "Nd" for ch in text)


def nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


# --------------------------------------------------------------------------- numbers

_SCI = re.compile(
    r"^(-?[0-9.]+)\s*(?:\\times|\\cdot|[x\u00d7*\u00b7])"  # 1.5 \times 10^{3}, 1.5x10^3
    r"\s*10\s*\^\s*\{?\s*([-+]?[0-9]+)\s*\}?$",
    re.ASCII,
)
_FRAC = re.compile(r"^(-?)\\[dt]?frac\s*\{\s*(-?[0-9]+)\s*\}\s*\{\s*([0-9]+)\s*\}$", re.ASCII)
_THOUSANDS = re.compile(r"^-?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?$", re.ASCII)
_PLAIN = re.compile(r"^-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$", re.ASCII)
_RATIO = re.compile(r"^(-?[0-9]+)\s*/\s*([0-9]+)$", re.ASCII)
_NUMBER_IN_TEXT = re.compile(
    r"-?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?(?:\s*/\s*[0-9]+)?",
    re.ASCII,
)
_AROUND = re.compile(r"\\text\{[^{}]*\}|\\[,;! ]|\\%|[$%€£¥]|\\\$", re.ASCII)


def _exact_number(text: str) -> float | None:
    text = text.replace(" ", "")
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    if _PLAIN.match(text):
        return float(text)
    if m := _RATIO.match(text):
        return float(Fraction(int(m[1]), int(m[2]))) if int(m[2]) else None
    if m := _FRAC.match(text):
        value = Fraction(int(m[2]), int(m[3])) if int(m[3]) else None
        return None if value is None else float(-value if m[1] else value)
    if (m := _SCI.match(text)) and _PLAIN.match(m[1]):
        try:
            return float(m[1]) * 10.0 ** int(m[2])
        except OverflowError:
            return math.copysign(math.inf, float(m[1]))
    return None


def plain_number(text: str) -> float | None:
    """A bare number, nothing symbolic: `12`, `-0.5`, `1,234`, `1.5e3`, `3/4` (None otherwise).
    Used to compare numbers without sympy (`1.5e3` would read there as 1.5 x e x 3)."""
    text = text.replace(" ", "")
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    if _PLAIN.match(text):
        return float(text)
    if m := _RATIO.match(text):
        return float(Fraction(int(m[1]), int(m[2]))) if int(m[2]) else None
    return None


def parse_number(text: str) -> float | None:
    """A number written plainly or with text around it: `1,234.5`, `1.5e3`, `1.5 \\times 10^3`,
    `3/4`, `\\frac{3}{4}`, `$18`, `18 dollars`, `75%` (read as 75). None when the text holds no
    number, or more than one (which one would be the answer?)."""
    text = nfkc(text).strip()
    if foreign_digits(text):
        return None
    value = _exact_number(text)
    if value is not None:
        return value
    bare = _AROUND.sub(" ", text).strip()
    value = _exact_number(bare)
    if value is not None:
        return value
    found = _NUMBER_IN_TEXT.findall(bare)
    if len(found) != 1:
        return None
    return _exact_number(found[0])


def numbers_equal(a: float, b: float, config: AnswerConfig) -> bool:
    return math.isclose(a, b, rel_tol=config.rel_tol, abs_tol=config.abs_tol)


# --------------------------------------------------------------------------- strings


def squad_normalize(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = nfkc(text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


_PUNCTUATION = frozenset(string.punctuation)


# --------------------------------------------------------------------------- choice

_LATEX_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\{([^{}]*)\}")


def _choice_text(answer: str) -> str:
    answer = _LATEX_TEXT.sub(r"\1", nfkc(answer))
    return answer.replace("**", "").strip()


def read_choice(answer: str, letters: str, options: list[str]) -> tuple[str | None, str | None]:
    """The one option an answer picks (a letter), or (None, reason).

    Rules, in order: the answer is a letter alone (`B`, `(B)`, `B.`, `b`); a letter then the
    option's text (`B) 12 apples`; the text must be neither another option's nor name another
    as `(C)`); exactly one option's text; else the standalone option letters in it: one is
    the pick, several is `several_options` (an answer listing A B C D picks nothing)."""
    text = _choice_text(answer)
    pattern = f"[{letters}]"
    if m := re.fullmatch(rf"(?:option\s+)?\(?({pattern})\)?[.:)]?", text, re.IGNORECASE):
        return m[1].upper(), None
    normalized = [squad_normalize(o) for o in options]
    if m := re.fullmatch(rf"\(?({pattern})[).:]\s*(.+)", text, re.DOTALL):
        if re.search(rf"(?<![A-Za-z])\(?{pattern}\)", m[2]):  # "(B) or (C)"
            return None, "several_options"
        rest = squad_normalize(m[2])
        picked = letters.index(m[1])
        if rest in normalized and normalized.index(rest) != picked:
            return None, "inconsistent_choice"
        return m[1], None
    by_text = [i for i, o in enumerate(normalized) if o and o == squad_normalize(text)]
    if len(by_text) == 1 and by_text[0] < len(letters):
        return letters[by_text[0]], None
    found = set(re.findall(rf"(?<![A-Za-z]){pattern}(?![A-Za-z])", text))
    if len(found) == 1:
        return found.pop(), None
    if len(found) > 1:
        return None, "several_options"
    return None, "no_option"


# --------------------------------------------------------------------------- collections


def split_elements(text: str, separators: str) -> list[str]:
    text = nfkc(text).strip()
    for left, right in ("{}", "[]", "()"):
        if text.startswith(left) and text.endswith(right):
            text = text[1:-1]
            break
    text = text.replace("\\{", "").replace("\\}", "")
    return [e.strip() for e in re.split(separators, text) if e.strip()]


def elements_equal(a: str, b: str, config: AnswerConfig) -> bool:
    if config.element_mode == "exact":
        return a == b
    x, y = parse_number(a), parse_number(b)
    if x is not None and y is not None:
        return numbers_equal(x, y, config)
    return config.element_mode == "normalized" and squad_normalize(a) == squad_normalize(b)


def collections_equal(answer: list[str], reference: list[str], config: AnswerConfig) -> bool:
    if config.mode == "list":
        return len(answer) == len(reference) and all(
            elements_equal(a, b, config) for a, b in zip(answer, reference, strict=True)
        )
    # set: every element of each side equals one of the other's (duplicates do not count)
    return all(any(elements_equal(a, b, config) for b in reference) for a in answer) and all(
        any(elements_equal(a, b, config) for a in answer) for b in reference
    )


# --------------------------------------------------------------------------- dispatch

#: Joins the elements of a reference given as a JSON list (`set` and `list` modes).
UNIT = "\x1f"


def compare(
    answer: str, references: list[str], config: AnswerConfig, options: list[str]
) -> Comparison:
    """Compare an extracted answer with acceptable references in a cheap mode (not `math`).

    For `set` and `list` each reference is a collection written as text; one given as a JSON
    list arrives joined by the ASCII unit separator (\x1f) and is split there."""
    mode = config.mode
    if mode == "exact":
        hits = [i for i, ref in enumerate(references) if answer == ref.strip()]
        return Comparison(True, bool(hits), hits[0] if hits else -1, answer)
    if mode == "normalized":
        norm = squad_normalize(answer)
        hits = [i for i, ref in enumerate(references) if norm == squad_normalize(ref)]
        return Comparison(bool(norm), bool(hits), hits[0] if hits else -1, norm)
    if mode == "numeric":
        if foreign_digits(nfkc(answer)):
            return Comparison(False, False, problem="foreign_digits")
        value = parse_number(answer)
        if value is None:
            return Comparison(False, False, problem="not_a_number")
        for i, ref in enumerate(references):
            expected = parse_number(ref)
            if expected is not None and numbers_equal(value, expected, config):
                return Comparison(True, True, i, f"{value:g}")
        return Comparison(True, False, -1, f"{value:g}")
    if mode == "choice":
        letter, problem = read_choice(answer, config.choices, options)
        if letter is None:
            return Comparison(False, False, problem=problem)
        for i, ref in enumerate(references):
            picked, _ = read_choice(ref, config.choices, options)
            if picked == letter:
                return Comparison(True, True, i, letter)
        return Comparison(True, False, -1, letter)
    # set / list
    elements = split_elements(answer, config.separators)
    if not elements:
        return Comparison(False, False, problem="no_elements")
    shown = ", ".join(elements)
    for i, ref in enumerate(references):
        wanted = ref.split(UNIT) if UNIT in ref else split_elements(ref, config.separators)
        if collections_equal(elements, [w.strip() for w in wanted], config):
            return Comparison(True, True, i, shown)
    return Comparison(True, False, -1, shown)
