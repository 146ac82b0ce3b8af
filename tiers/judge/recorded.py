"""Which model judged: the last line of a judge verdict's feedback, `judge_model: NAME`.

A verdict's components are numbers only, so the model the server answered with (its response's
`model`, else the endpoint's configured one) is written as the feedback's last line, after
anything the candidate could have put in the feedback (the monitor quotes it, an endpoint's
error body may echo it): the last line is always the tier's own, on every verdict a judge tier
returns. A verdict no model answered (the endpoint down, a template error) ends with the bare
marker `judge_model:`, so a line the candidate wrote never ends up last. The calibration page
groups a judge's verdicts by it, so swapping the model behind one endpoint name is two judges
there, not one.
"""

from __future__ import annotations

from collections.abc import Iterable

MARKER = "judge_model:"
PREFIX = MARKER + " "
MAX_CHARS = 200


def clean(model: str) -> str:
    """A model name on one line: control characters and surrounding blanks dropped, capped."""
    kept = "".join(ch if ch.isprintable() else " " for ch in model)
    return " ".join(kept.split())[:MAX_CHARS]


def note(feedback: str, models: Iterable[str | None] = ()) -> str:
    """`feedback` with the tier's judge_model line last: the models, or the bare marker when
    no model answered."""
    names = list(dict.fromkeys(clean(m) for m in models if m and clean(m)))
    line = PREFIX + ", ".join(names) if names else MARKER
    return f"{feedback}\n{line}" if feedback else line


def judge_model(feedback: str | None) -> str | None:
    """The model a judge verdict recorded (its feedback's last line), else None (a verdict
    stored before models were recorded, or one no model answered: the bare marker)."""
    if not feedback:
        return None
    last = feedback.rsplit("\n", 1)[-1]
    if not last.startswith(PREFIX):
        return None  # the bare marker, or no line of the tier's at all
    return last.removeprefix(PREFIX).strip() or None
