"""What the task page shows of an item: every payload is hostile text, shown as text."""

from __future__ import annotations

import base64
import re

from verifier_service.review import render

HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)">'


def _no_markup_from(html: str) -> None:
    assert "<script" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;" in html


def test_each_kind_shows_hostile_text_escaped() -> None:
    _no_markup_from(render.candidate("text", {"text": HOSTILE}))
    _no_markup_from(render.candidate("code", {"code": HOSTILE, "tests": HOSTILE}))
    _no_markup_from(render.candidate("json", {"tool": HOSTILE, "args": {"q": HOSTILE}}))
    _no_markup_from(render.candidate("json", {"not_a_tool_call": HOSTILE}))
    _no_markup_from(render.candidate("somethingelse", {"x": HOSTILE}))
    _no_markup_from(render.reference({"schema": HOSTILE}))
    step = {"action": {"kind": "text", "payload": {"text": HOSTILE}}, "observation": HOSTILE}
    _no_markup_from(render.action(step) + render.observation(step))
    verdict = {"tier": HOSTILE, "status": HOSTILE, "score": 0.5, "feedback": HOSTILE,
               "reason": HOSTILE, "components": {HOSTILE: 1.0}}  # fmt: skip
    html = render.verdict(verdict)
    _no_markup_from(html)
    assert "status-unknown" in html  # a status that is no word gets no class of its own


def test_guidelines_markdown_keeps_no_raw_html_nor_script_links() -> None:
    html = render.markdown(
        f"**Bold** {HOSTILE}\n\n[docs](https://example.org) [x](javascript:alert(3))"
    )
    _no_markup_from(html)
    assert "<strong>Bold</strong>" in html
    assert 'href="https://example.org"' in html
    assert "javascript:" not in re.findall(r'href="([^"]*)"', html)[-1]
    assert 'href="javascript' not in html


def test_a_molecule_is_drawn_as_an_image_and_a_bad_smiles_is_said_to_be_so() -> None:
    html = render.molecule({"smiles": "c1ccccc1O"})
    (data,) = re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)
    svg = base64.b64decode(data).decode()
    assert svg.lstrip().startswith(("<?xml", "<svg"))
    assert "<script" not in svg
    assert "c1ccccc1O" in html
    bad = render.molecule({"smiles": f"C1CC{HOSTILE}"})
    assert "could not be drawn" in bad
    _no_markup_from(bad)


def test_huge_text_is_cut_with_a_note() -> None:
    html = render.candidate("text", {"text": "a" * (render.MAX_TEXT_CHARS + 10)})
    assert "10 more characters not shown" in html


def test_a_tool_call_is_shown_as_sent_with_nothing_invented() -> None:
    bare = render.candidate("json", {"tool": "search"})
    assert "No arguments." in bare
    assert "null" not in bare
    assert "args" not in bare
    sent = render.candidate("json", {"name": "lookup", "arguments": {"q": 1}, "id": "c1"})
    assert "&#34;arguments&#34;" in sent
    assert "&#34;id&#34;: &#34;c1&#34;" in sent
    assert "&#34;args&#34;" not in sent  # the policy's own key, not ours


def test_a_code_item_shows_only_the_fields_the_trainer_set() -> None:
    from tiers.code.schemas import CodePayload

    stored = CodePayload(code="x = 1", tests="assert x == 1").model_dump(mode="json")
    assert len(stored) > 10  # what the service keeps: every default filled in
    html = render.candidate("code", stored)
    assert "Other fields" not in html
    assert "case_timeout_s" not in html
    set_one = {**stored, "case_timeout_s": 5.0}
    html = render.candidate("code", set_one)
    assert "Other fields" in html
    assert "case_timeout_s" in html
    assert "abs_tol" not in html
