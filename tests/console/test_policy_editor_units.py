"""The policy editor's logic without a service: every problem of a draft is found at once, each
at its line (not only the first layer that pydantic stops at), and a draft's diff against the
version it started from keeps what the operator wrote and folds what did not change."""

from __future__ import annotations

import pytest

from verifier_service.console.policies import service
from verifier_service.policies.service import InvalidPolicyError, validate_document

BASE = """\
# A policy with comments the operator wrote: the diff keeps them.
name: multi
ladders:
  molecule:
    - tier: chem.fast
    - tier: chem.surrogate
      # only valid molecules climb
      gate: "verdicts['chem.fast'].status == 'passed'"
    - tier: human
      gate: "verdicts['chem.surrogate'].score > 0.8"
      config:
        queue: multi-review
        rubric:
          dimensions:
            - {name: ok, type: score, min: 0, max: 1}
        overlap: 2
reward:
  molecule:
    components:
      - name: qed
        tier: chem.fast
        component: qed
        weight: 2.0
"""


def _line(text: str, needle: str) -> int:
    return 1 + next(n for n, line in enumerate(text.splitlines()) if needle in line)


def test_the_base_policy_is_valid() -> None:
    assert service.check_draft("multi", BASE).valid


def test_a_misspelt_field_no_longer_hides_a_broken_gate() -> None:
    # Before: pydantic stopped at the unknown field, the gate's syntax error was never seen.
    text = BASE.replace("component: qed", "component: qed\n        colour: red").replace(
        "score > 0.8", "score >> 0.8"
    )
    check = service.check_draft("multi", text)
    placed = {e.loc: e.line for e in check.errors}
    assert placed == {
        "reward.molecule.components[0].colour": _line(text, "colour: red"),
        "ladders.molecule[2].gate": _line(text, "score >> 0.8"),
    }


def test_a_schema_problem_no_longer_hides_a_tier_config_problem() -> None:
    # The human tier's own config check ran only on a document that passed the schema.
    text = BASE.replace("overlap: 2", "overlap: 0").replace("weight: 2.0", "weight: -1")
    with pytest.raises(InvalidPolicyError) as raised:
        validate_document(text)
    locs = {e["loc"] for e in raised.value.extra["errors"]}
    assert locs == {"reward.molecule.components[0].weight", "ladders.molecule[2].config"}
    check = service.check_draft("multi", text)
    placed = {e.loc: e.line for e in check.errors}
    assert placed["reward.molecule.components[0].weight"] == _line(text, "weight: -1")
    assert placed["ladders.molecule[2].config"] == _line(text, "config:")


def test_a_broken_gate_no_longer_hides_a_tier_config_problem() -> None:
    # Every field valid, the gate broken: the cross-field check raised and the tiers' configs
    # were never looked at.
    text = BASE.replace("overlap: 2", "overlap: 0").replace("score > 0.8", "score >> 0.8")
    with pytest.raises(InvalidPolicyError) as raised:
        validate_document(text)
    locs = [e["loc"] for e in raised.value.extra["errors"]]
    assert locs == ["ladders.molecule[2].gate", "ladders.molecule[2].config"]


def test_an_unknown_tier_and_a_bad_transform_are_both_named() -> None:
    text = BASE.replace("tier: chem.surrogate\n", "tier: chem.surrogat\n").replace(
        "weight: 2.0", "weight: 2.0\n        transform: {type: sigmoid, low: 0.9, high: 0.1, k: 1}"
    )
    check = service.check_draft("multi", text)
    placed = {e.loc: e.line for e in check.errors}
    assert placed["reward.molecule.components[0].transform"] == _line(text, "type: sigmoid")
    assert placed["ladders.molecule[1].tier"] == _line(text, "chem.surrogat")
    assert "did you mean 'chem.surrogate'" in next(
        e.msg for e in check.errors if e.loc == "ladders.molecule[1].tier"
    )


def test_a_missing_required_field_is_named_once() -> None:
    text = BASE.replace("name: multi\n", "")
    check = service.check_draft("multi", text)
    assert [(e.loc, e.msg) for e in check.errors] == [("name", "required field is missing")]


def test_a_yaml_syntax_error_is_one_problem_at_its_line() -> None:
    text = BASE.replace("  molecule:\n    - tier: chem.fast", "  molecule:\n   bad: [", 1)
    [error] = service.check_draft("multi", text).errors
    assert (error.loc, error.line) == ("", 6)  # where the parser found it wrong
    assert error.msg.startswith("invalid YAML at line 6")


def test_the_diff_keeps_comments_and_marks_changes() -> None:
    text = BASE.replace(
        "      # only valid molecules climb\n", "      # valid molecules with some QED climb\n"
    ).replace("weight: 2.0", "weight: 3.0")
    diff = service.draft_diff(4, BASE, text)
    assert (diff.base_version, diff.added, diff.removed) == (4, 2, 2)
    lines = [line for block in diff.blocks for line in block.lines]
    changed = [(line.kind, line.text.strip()) for line in lines if line.kind != "same"]
    assert changed == [
        ("removed", "# only valid molecules climb"),
        ("added", "# valid molecules with some QED climb"),
        ("removed", "weight: 2.0"),
        ("added", "weight: 3.0"),
    ]
    # Every line of both versions is there once, in order, with its numbers.
    assert [line.new_no for line in lines if line.kind != "removed"] == list(
        range(1, len(text.splitlines()) + 1)
    )
    assert [line.old_no for line in lines if line.kind != "added"] == list(
        range(1, len(BASE.splitlines()) + 1)
    )


def test_the_diff_folds_unchanged_lines_away_from_changes() -> None:
    text = BASE.replace("weight: 2.0", "weight: 3.0")  # the last line only
    diff = service.draft_diff(1, BASE, text)
    assert [b.collapsed for b in diff.blocks] == [True, False]
    folded, shown = diff.blocks
    assert folded.lines[0].text.startswith("# A policy")  # the comment is kept
    assert [line.kind for line in shown.lines] == ["same"] * 3 + ["removed", "added"]
    assert len(folded.lines) + 3 == len(BASE.splitlines()) - 1


def test_an_unchanged_draft_has_no_diff() -> None:
    diff = service.draft_diff(1, BASE, BASE.replace("\n", "\r\n"))  # a form sends CRLF
    assert (diff.added, diff.removed) == (0, 0)
    assert [b.collapsed for b in diff.blocks] == [True]
