"""Which model judged: the last line of a judge verdict's feedback, `judge_model: NAME`.

A verdict's components are numbers only, so the model the server answered with (its response's
`model`, else the endpoint's configured one) is written as the feedback's last line, after
anything the candidate could have put in the feedback (the monitor quotes it): the last line is
always the tier's own. The calibration page groups a judge's verdicts by it, so swapping the
model behind one endpoint name is two judges there, not one.
"""

from __future__ import annotations

from collections.abc import Iterable

PREFIX = "judge_model: "
MAX_CHARS = 200


def clean(model: str) -> str:
    """A model name on one line: control characters and surrounding blanks dropped, capped."""
    kept = "".join(ch if ch.isprintable() else " " for ch in model)
    return " ".join(kept.split())[:MAX_CHARS]


def note(feedback: str, models: Iterable[str | None]) -> str:
    """`feedback` with the judge_model line last; unchanged when no model is known."""
    names = list(dict.fromkeys(clean(m) for m in models if m and clean(m)))
    if not names:
        return feedback
    line = PREFIX + ", ".join(names)
    return f"{feedback}\n{line}" if feedback else line


def judge_model(feedback: str | None) -> str | None:
    """The model a judge verdict recorded (its feedback's last line), else None (a verdict
    stored before models were recorded, or one no model answered)."""
    if not feedback:
        return None
    last = feedback.rsplit("\n", 1)[-1]
    if not last.startswith(PREFIX):
        return None
    return last.removeprefix(PREFIX).strip() or None
