"""An operator edits a policy in Chromium: a draft with two problems shows both, each printed
at its line and reachable from a list of links that move focus to the line; the draft's diff
against the active version keeps the comments, folds unchanged lines and marks each change with
+ or a minus sign as well as colour; "Check and show changes" stores nothing."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_support import Console, operator_tab

# Screenshots go to VERIFIER_SCREENSHOTS when set (copied to docs/img/ when the pages change).
MINUS = "\N{MINUS SIGN}"  # the diff's marker of a removed line
IMG = Path(os.environ.get("VERIFIER_SCREENSHOTS") or tempfile.mkdtemp(prefix="editor-shots-"))

ACTIVE = """\
# The editor test's policy. Molecules: the cheap check, then people for the promising ones.
name: {name}
description: one cheap tier for molecules and tool calls
ladders:
  molecule:
    - tier: chem.fast
    # only molecules that parse and look drug-like climb
    - tier: human
      gate: "verdicts['chem.fast'].status == 'passed' && verdicts['chem.fast'].components.qed > 0.5"
      config:
        queue: {name}
        rubric:
          dimensions:
            - {{name: ok, type: score, min: 1, max: 5}}
  json:
    - tier: schema
reward:
  molecule:
    components:
      - name: qed
        tier: chem.fast
        component: qed
        weight: 1.0
  json:
    components:
      - name: schema
        tier: schema
        component: score
"""
#: Two problems in two places: a misspelt field, and a gate that does not parse.
TWO_ERRORS = ACTIVE.replace("        weight: 1.0\n", "        wieght: 1.0\n").replace(
    "components.qed > 0.5", "components.qed >> 0.5"
)
#: A valid change: QED counts twice, and the comment says why.
CHANGED = ACTIVE.replace(
    "        weight: 1.0\n", "        # QED matters most here\n        weight: 2.0\n"
)


def _line(text: str, needle: str) -> int:
    return 1 + next(n for n, line in enumerate(text.splitlines()) if needle in line)


@pytest.fixture(scope="module")
def policy(console: Console) -> str:
    name = f"ced-{uuid.uuid4().hex[:6]}"
    with console.service.client() as api:
        made = api.post("/v1/policies", json={"text": ACTIVE.format(name=name)})
    assert made.status_code == 201, made.text
    return name


@pytest.fixture
def page(console: Console, browser: Any, policy: str) -> Iterator[Any]:
    path = f"/console/policies/{policy}/edit"
    with operator_tab(browser, console.service.base_url, path, console.operator) as tab:
        yield tab


def _versions(console: Console, name: str) -> int:
    with console.service.client() as api:
        detail = api.get(f"/v1/console/policies/{name}")
    assert detail.status_code == 200, detail.text
    return len(detail.json()["versions"])


def test_two_errors_are_shown_at_their_lines(console: Console, page: Any, policy: str) -> None:
    text = TWO_ERRORS.format(name=policy)
    editor = page.get_by_label("Policy document (YAML or JSON)")
    editor.fill(text)
    page.get_by_role("button", name="Save draft").click()
    page.wait_for_selector("#problems")
    assert page.locator("#h-problems").inner_text().startswith("2 problems")
    field_line, gate_line = _line(text, "wieght: 1.0"), _line(text, "qed >> 0.5")
    links = page.locator("#problem-list a.goto")
    assert sorted(links.all_inner_texts()) == sorted([f"Line {field_line}", f"Line {gate_line}"])
    # Each problem is printed under its own line of the draft.
    field = page.locator(f"#source li[data-line='{field_line}']")
    assert "wieght" in field.locator(".field-error").inner_text()
    gate = page.locator(f"#source li[data-line='{gate_line}']")
    assert "ladders.molecule[1].gate" in gate.locator(".field-error").inner_text()
    assert page.locator("#source .field-error").count() == 2
    # The links are reached with Tab and move focus to the line, selected in the editor.
    links.first.focus()
    first_line = int(links.first.get_attribute("data-line") or 0)
    page.keyboard.press("Enter")
    selected = page.evaluate(
        "(() => { const t = document.activeElement;"
        " return [t.id, t.value.slice(t.selectionStart, t.selectionEnd)]; })()"
    )
    assert selected == ["draft-text", text.splitlines()[first_line - 1]]
    # The diff of what was written against the active version: both changes, marked.
    added = page.locator("#draft-diff .dl.added").all_inner_texts()
    removed = page.locator("#draft-diff .dl.removed").all_inner_texts()
    assert any("+" in a and "wieght: 1.0" in a for a in added), added
    assert any(MINUS in r and "weight: 1.0" in r for r in removed), removed
    assert page.locator("#draft-diff details.fold").count() >= 1
    assert _versions(console, policy) == 1  # nothing stored
    page.screenshot(path=str(IMG / "console-policy-errors-1280.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(IMG / "console-policy-errors-390.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_the_diff_shows_the_change_and_keeps_comments(
    console: Console, page: Any, policy: str
) -> None:
    text = CHANGED.format(name=policy)
    page.get_by_label("Policy document (YAML or JSON)").fill(text)
    page.get_by_role("button", name="Check and show changes").click()
    page.wait_for_selector("#checked")
    assert "valid" in page.locator("#checked").inner_text()
    assert page.locator("#h-diff").inner_text() == "Changes against v1"
    summary = page.locator("#diff-summary").inner_text()
    assert "+2 added" in summary
    assert f"{MINUS}1 removed" in summary
    rows = page.locator("#draft-diff .dl")
    kinds = [c.split()[-1] for c in rows.evaluate_all("rs => rs.map(r => r.className)")]
    texts = [" ".join(t.split()) for t in rows.locator("code").all_inner_texts()]
    changed = [(k, t) for k, t in zip(kinds, texts, strict=True) if k != "same"]
    assert changed == [
        ("removed", "removed: weight: 1.0"),
        ("added", "added: # QED matters most here"),
        ("added", "added: weight: 2.0"),
    ]
    # Unchanged lines far from the change are folded, the file's comments with them.
    fold = page.locator("#draft-diff details.fold").first
    assert "unchanged lines" in fold.locator("summary").inner_text()
    assert not fold.locator(".dl").first.is_visible()
    fold.locator("summary").focus()
    page.keyboard.press("Enter")  # opens from the keyboard
    assert fold.locator(".dl").first.is_visible()
    assert "# The editor test's policy" in fold.inner_text()
    marks = page.locator("#draft-diff .dl.added .mark").all_inner_texts()
    assert marks == ["+", "+"]
    assert _versions(console, policy) == 1  # checking stores nothing
    page.screenshot(path=str(IMG / "console-policy-draft-diff-1280.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(IMG / "console-policy-draft-diff-390.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
