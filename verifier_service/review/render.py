"""How a review task's item is shown to people: HTML fragments for the task page.

Every payload is hostile: a policy under training wrote it. All text goes through
`markupsafe.escape`; molecules become RDKit SVG shown as a data-URL image (an image cannot run
script), and guidelines are markdown rendered with raw HTML switched off.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

#: Longest text shown in full; the rest is cut with a note (pages stay fast on huge payloads).
MAX_TEXT_CHARS = 200_000
#: Largest molecule drawn (heavy atoms); bigger ones are shown as SMILES only.
MAX_DRAWN_ATOMS = 250
#: Molecule drawing size in CSS pixels.
MOLECULE_PX = (380, 280)


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    # CommonMark without raw HTML: `<script>` in guidelines is shown as text. markdown-it also
    # refuses javascript:/vbscript:/data: link targets by default.
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})


def markdown(text: str) -> Markup:
    """Guidelines (markdown) as safe HTML: no raw HTML passes through."""
    return Markup(_markdown().render(text[:MAX_TEXT_CHARS]))


def markdown_inline(text: str) -> Markup:
    """One line of markdown (a queue's guidelines excerpt) as safe inline HTML."""
    return Markup(_markdown().renderInline(text[:2000]))  # html is off: safe


def _clip(text: str) -> str:
    if len(text) <= MAX_TEXT_CHARS:
        return text
    return f"{text[:MAX_TEXT_CHARS]}\n… ({len(text) - MAX_TEXT_CHARS} more characters not shown)"


def pre(text: object, css: str = "") -> Markup:
    """Text in a <pre>, escaped."""
    cls = Markup(' class="{}"').format(css) if css else Markup("")
    return Markup("<pre{}>{}</pre>").format(cls, _clip(str(text)))


def pretty_json(value: object) -> str:
    """JSON indented for reading (non-ASCII kept as written)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def number(value: object) -> str:
    """A component or score for people: 4 significant digits, integers as integers."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if float(value).is_integer() and abs(value) < 1e12:
        return str(int(value))
    return f"{value:.4g}"


# --- molecules ---------------------------------------------------------------------------------


def molecule_svg(smiles: str) -> str | None:
    """The molecule drawn by RDKit as SVG text, or None when it cannot be parsed or is too big."""
    from rdkit import Chem, rdBase
    from rdkit.Chem.Draw import rdMolDraw2D

    with rdBase.BlockLogs():  # an unparsable SMILES is shown as such, not logged
        mol = Chem.MolFromSmiles(smiles, sanitize=True)
        if mol is None:
            mol = Chem.MolFromSmiles(smiles, sanitize=False)
            if mol is None:
                return None
            mol.UpdatePropertyCache(strict=False)
    if mol.GetNumAtoms() == 0 or mol.GetNumAtoms() > MAX_DRAWN_ATOMS:
        return None
    drawer = rdMolDraw2D.MolDraw2DSVG(*MOLECULE_PX)
    options: Any = drawer.drawOptions()  # the stubs type its attributes wrongly
    options.clearBackground = False
    options.addStereoAnnotation = True
    rdMolDraw2D.PrepareAndDrawMolecule(drawer, mol)
    drawer.FinishDrawing()
    return str(drawer.GetDrawingText())


def molecule(payload: Mapping[str, Any]) -> Markup:
    smiles = str(payload.get("smiles", ""))
    svg = molecule_svg(smiles) if smiles else None
    if svg is None:
        picture = Markup('<p class="nodraw">This SMILES could not be drawn.</p>')
    else:
        # As an image, not inline SVG: an image document runs no script whatever it holds.
        data = base64.b64encode(svg.encode()).decode("ascii")
        picture = Markup(
            '<img class="mol" width="{}" height="{}" alt="Structure of {}" '
            'src="data:image/svg+xml;base64,{}">'
        ).format(*MOLECULE_PX, smiles[:200], data)
    return Markup(
        '<figure class="molecule">{}<figcaption><span class="k">SMILES</span> '
        '<code class="smiles">{}</code></figcaption></figure>'
    ).format(picture, _clip(smiles))


# --- code, json, text ----------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _code_defaults() -> dict[str, Any]:
    from tiers.code.schemas import CodePayload

    return {
        name: field.get_default(call_default_factory=True)
        for name, field in CodePayload.model_fields.items()
        if not field.is_required()
    }


def code(payload: Mapping[str, Any]) -> Markup:
    language = str(payload.get("language", "python"))
    parts = [
        Markup(
            '<section class="code"><h3>Code <span class="tag">{}</span></h3>{}</section>'
        ).format(language, pre(payload.get("code", ""), "src"))
    ]
    if payload.get("tests"):
        parts.append(
            Markup('<section class="code"><h3>Tests</h3>{}</section>').format(
                pre(payload["tests"], "src")
            )
        )
    # The fields the trainer set: those still at the code tier's defaults are left out (the
    # stored payload carries every default; the reviewer sees what was sent).
    defaults = _code_defaults()
    extra = {
        k: v
        for k, v in payload.items()
        if k not in ("language", "code", "tests") and not (k in defaults and defaults[k] == v)
    }
    if extra:
        parts.append(json_block(extra, "Other fields"))
    # Code and tests side by side: the sandbox's results below stay in view.
    return Markup('<div class="code-grid">{}</div>').format(Markup("").join(parts))


def json_block(value: object, title: str = "") -> Markup:
    heading = Markup("<h3>{}</h3>").format(title) if title else Markup("")
    return Markup('<section class="json">{}{}</section>').format(
        heading, pre(pretty_json(value), "src")
    )


def tool_call(payload: Mapping[str, Any]) -> Markup:
    """A JSON action; a tool call ({tool|name, args|arguments}) gets its name as a heading."""
    name = payload.get("tool", payload.get("name"))
    if isinstance(name, str):
        # As sent: the arguments under the name the policy used, nothing invented (a call
        # without arguments shows none, not `"args": null`).
        shown = {k: v for k, v in payload.items() if k not in ("tool", "name")}
        sent_args = [k for k in ("args", "arguments") if k in payload]
        if shown and list(shown) == sent_args:
            body = pretty_json(payload[sent_args[0]])
        else:
            body = pretty_json(shown)
        if not shown:
            return Markup(
                '<section class="json"><h3>Tool call <code class="tool">{}</code></h3>'
                '<p class="muted">No arguments.</p></section>'
            ).format(name)
        return Markup(
            '<section class="json"><h3>Tool call <code class="tool">{}</code></h3>{}</section>'
        ).format(name, pre(body, "src"))
    return json_block(payload, "JSON")


def text(payload: Mapping[str, Any]) -> Markup:
    return Markup('<div class="text">{}</div>').format(_clip(str(payload.get("text", ""))))


def candidate(kind: str, payload: Any) -> Markup:
    """One candidate's payload by its kind; anything unexpected as pretty JSON."""
    if not isinstance(payload, Mapping):
        return json_block(payload, kind)
    if kind == "molecule":
        return molecule(payload)
    if kind == "code":
        return code(payload)
    if kind == "json":
        return tool_call(payload)
    if kind == "text":
        return text(payload)
    return json_block(payload, kind)


def reference(value: Mapping[str, Any] | None) -> Markup:
    if not value:
        return Markup("")
    return Markup('<details class="reference"><summary>Reference</summary>{}</details>').format(
        pre(pretty_json(value), "src")
    )


# --- trajectories --------------------------------------------------------------------------------


def trajectory_steps(payload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The steps of a trajectory payload: each {action: candidate, observation?}."""
    steps = payload.get("steps")
    return [s for s in steps if isinstance(s, Mapping)] if isinstance(steps, list) else []


def action(step: Mapping[str, Any]) -> Markup:
    act = step.get("action")
    if not isinstance(act, Mapping):
        return json_block(act, "Action")
    return candidate(str(act.get("kind", "json")), act.get("payload"))


def observation(step: Mapping[str, Any]) -> Markup:
    seen = step.get("observation")
    if seen is None:
        return Markup('<p class="muted">No observation.</p>')
    return pre(seen if isinstance(seen, str) else pretty_json(seen), "obs")


def final_answer(payload: Mapping[str, Any]) -> Markup:
    answer = payload.get("final_answer")
    if not isinstance(answer, Mapping):
        return Markup("")
    return Markup('<section class="final"><h3>Final answer</h3>{}</section>').format(
        candidate(str(answer.get("kind", "text")), answer.get("payload"))
    )


# --- verdicts ------------------------------------------------------------------------------------


def verdict(v: Mapping[str, Any]) -> Markup:
    """One lower tier's verdict: tier, status, score, components and feedback."""
    status = str(v.get("status", "unknown"))
    score = v.get("score")
    components = v.get("components") or {}
    rows = Markup("").join(
        Markup('<tr><th scope=row title="{}">{}</th><td>{}</td></tr>').format(k, k, number(val))
        for k, val in (components.items() if isinstance(components, Mapping) else [])
    )
    table = (
        Markup('<table class="components"><caption>Components</caption>{}</table>').format(rows)
        if rows
        else Markup("")
    )
    feedback = v.get("feedback")
    fb = pre(feedback, "feedback") if feedback else Markup("")
    reason = v.get("reason")
    why = Markup('<span class="reason">{}</span>').format(reason) if reason else Markup("")
    return Markup(
        '<article class="verdict"><header><span class="tier">{}</span>'
        '<span class="status status-{}">{}</span>{}<span class="score">{}</span></header>'
        "{}{}</article>"
    ).format(  # feedback (what a model learns from) before the numbers
        v.get("tier", "?"),
        status if status.isalpha() else "unknown",
        status,
        why,
        "" if score is None else f"score {number(score)}",
        fb,
        table,
    )


def verdict_list(verdicts: Sequence[Mapping[str, Any]]) -> Markup:
    if not verdicts:
        return Markup('<p class="muted">No lower-tier verdicts.</p>')
    return Markup("").join(verdict(v) for v in verdicts)
