"""Finding a text's final answer: one function per extractor, tried in the policy's order.

Every extractor is a linear scan or a regular expression without nested quantifiers, so the
time it takes is bounded by the text's length (itself capped by the policy's max_text_chars).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tiers.text.schemas import AnswerConfig, Extractor

#: What feedback calls each extractor's place ("extracted 3/4 from \boxed{}").
SOURCE = {
    "boxed": "\\boxed{{}}",
    "gsm8k": "'#### N'",
    "answer_is": "'the answer is ...'",
    "answer_tag": "<{tag}>",
    "last_number": "the last number",
    "json_field": "JSON field {field}",
    "regex": "the policy's regex",
    "whole": "the whole text",
}


@dataclass(frozen=True)
class Extraction:
    """An answer found in a text, or why none counts."""

    answer: str | None
    extractor: str | None = None
    problem: str | None = None  # reason code when the extractor found something unusable
    detail: str = ""


def strip_thinking(text: str, tag: str) -> str:
    """The text without its thinking: everything up to the last closing tag goes (a chat
    template may open the block in the prompt), then an unclosed opening tag runs to the end."""
    close = f"</{tag}>"
    at = text.rfind(close)
    if at >= 0:
        text = text[at + len(close) :]
    opening = text.find(f"<{tag}>")
    return text if opening < 0 else text[:opening]


_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BOXED_BARE = re.compile(r"\\boxed\s+([^\s{}$]+)")


def boxed_contents(text: str) -> list[str]:
    """Contents of every \\boxed{...} / \\fbox{...} (balanced braces), and `\\boxed 5`, in order."""
    found: list[tuple[int, str]] = []
    for match in _BOXED.finditer(text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            char = text[i]
            if char == "\\" and i + 1 < len(text):
                i += 2
                continue
            depth += {"{": 1, "}": -1}.get(char, 0)
            i += 1
        if depth == 0:
            found.append((match.start(), text[match.end() : i - 1]))
    found += [(m.start(), m.group(1)) for m in _BOXED_BARE.finditer(text)]
    return [content for _, content in sorted(found)]


_GSM8K = re.compile(r"####[ \t]*([^\n]*)")
# "The final answer is: 3/4." up to the end of its line or a sentence-ending period.
_ANSWER_IS = re.compile(
    r"answer\s+is\s*:?[ \t]*(.+?)(?:\.(?=\s|$)|\n|$)", re.IGNORECASE | re.MULTILINE
)
_NUMBER = re.compile(
    r"(?<![\w.])-?(?:[0-9]+/[0-9]+|(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?"
    r"(?:[eE][-+]?[0-9]+)?|\.[0-9]+)",
    re.ASCII,
)
#: Most `{` positions json_field tries to decode from, counted from the end of the text.
JSON_STARTS = 64


def _last(matches: list[str]) -> str | None:
    return matches[-1] if matches else None


def _boxed(text: str, config: AnswerConfig) -> Extraction:
    contents = [c.strip() for c in boxed_contents(text)]
    if not contents:
        return Extraction(None)
    distinct = list(dict.fromkeys(contents))
    if config.several_boxed == "reject" and len(distinct) > 1:
        shown = ", ".join(distinct[:4]) + (", ..." if len(distinct) > 4 else "")
        return Extraction(
            None, "boxed", "several_answers", f"{len(distinct)} different \\boxed{{}}: {shown}"
        )
    return Extraction(contents[-1], "boxed")


def _tag(text: str, config: AnswerConfig) -> Extraction:
    tag = re.escape(config.answer_tag)
    found = re.findall(rf"<{tag}>(.*?)</{tag}>", text, re.DOTALL)
    return Extraction(_last(found), "answer_tag")


def _json_value(text: str, path: str) -> Any:
    keys = path.split(".")
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"\{", text)][-JSON_STARTS:]
    for start in reversed(starts):  # the last object that has the field wins
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                break
            value = value[key]
        else:
            return value
    return None


def _json_field(text: str, config: AnswerConfig) -> Extraction:
    value = _json_value(text, config.json_field or "")
    if value is None:
        return Extraction(None)
    return Extraction(value if isinstance(value, str) else json.dumps(value), "json_field")


def _regex(text: str, config: AnswerConfig) -> Extraction:
    match = None
    for match in re.finditer(config.regex or "", text):  # noqa: B007 (the last one counts)
        pass
    if match is None:
        return Extraction(None)
    if "answer" in match.re.groupindex:
        return Extraction(match.group("answer"), "regex")
    return Extraction(match.group(1) if match.re.groups else match.group(0), "regex")


_EXTRACTORS: dict[str, Callable[[str, AnswerConfig], Extraction]] = {
    "boxed": _boxed,
    "gsm8k": lambda text, _: Extraction(_last(_GSM8K.findall(text)), "gsm8k"),
    "answer_is": lambda text, _: Extraction(_last(_ANSWER_IS.findall(text)), "answer_is"),
    "answer_tag": _tag,
    "last_number": lambda text, _: Extraction(_last(_NUMBER.findall(text)), "last_number"),
    "json_field": _json_field,
    "regex": _regex,
    "whole": lambda text, _: Extraction(text, "whole"),
}

_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("**", "**"))


def clean(answer: str) -> str:
    """An extracted answer without what surrounds it in prose: whitespace, a final period,
    math delimiters and bold markers."""
    answer = answer.strip()
    changed = True
    while changed:
        changed = False
        if len(answer) > 1 and answer.endswith("."):
            answer, changed = answer[:-1].rstrip(), True
        for left, right in _WRAPPERS:
            if len(answer) > len(left) + len(right) and answer.startswith(left):
                if answer.endswith(right):
                    answer, changed = answer[len(left) : -len(right)].strip(), True
    return answer


def extract(text: str, config: AnswerConfig) -> Extraction:
    """The final answer by the first extractor (in the config's order) that finds one.

    An extractor that finds something unusable (several different \\boxed{} under `reject`)
    stops the search: a later, weaker extractor must not rescue what the stronger one refused.
    """
    if config.think_tag:
        text = strip_thinking(text, config.think_tag)
    for name in config.extract:
        found = _EXTRACTORS[name](text, config)
        if found.problem is not None:
            return found
        if found.answer is not None:
            answer = clean(found.answer)
            if answer:
                return Extraction(answer, name)
    return Extraction(None)


def source_name(extractor: Extractor | str, config: AnswerConfig) -> str:
    """Where an extractor looks, for feedback."""
    return SOURCE[extractor].format(tag=config.answer_tag, field=config.json_field)
