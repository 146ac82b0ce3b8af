"""Correct and incorrect solutions with their tests: every verdict must be right."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tiers.base import Candidate, Verdict, VerdictStatus
from tiers.code.sandbox import SandboxTier, normalize_source
from tiers.registry import get_tier

Judge = Callable[..., Verdict]

FIZZ_TESTS = """
assert fizz(3) == "Fizz"
assert fizz(5) == "Buzz"
assert fizz(15) == "FizzBuzz"
assert fizz(7) == "7"
"""
FIZZ_RIGHT = """
def fizz(n):
    out = ("Fizz" if n % 3 == 0 else "") + ("Buzz" if n % 5 == 0 else "")
    return out or str(n)
"""
FIZZ_WRONG = """
def fizz(n):
    if n % 3 == 0:
        return "Fizz"
    if n % 5 == 0:
        return "Buzz"
    return str(n)
"""

PYTEST_TESTS = """
import pytest
from solution import Stack

def test_push_pop():
    s = Stack()
    s.push(1)
    s.push(2)
    assert s.pop() == 2

def test_empty_pop_raises():
    with pytest.raises(IndexError):
        Stack().pop()

@pytest.mark.parametrize("items", [[], [1], [1, 2, 3]])
def test_len(items):
    s = Stack()
    for x in items:
        s.push(x)
    assert len(s) == len(items)

class TestPeek:
    def test_peek_keeps_item(self):
        s = Stack()
        s.push(5)
        assert s.peek() == 5
        assert len(s) == 1
"""
STACK_RIGHT = """
class Stack:
    def __init__(self):
        self._items = []
    def push(self, x):
        self._items.append(x)
    def pop(self):
        return self._items.pop()
    def peek(self):
        return self._items[-1]
    def __len__(self):
        return len(self._items)
"""
STACK_WRONG = STACK_RIGHT.replace("return self._items.pop()", "return self._items.pop(0)")

# (name, code, tests, expected status, expected score, expected reason)
CASES: list[tuple[str, str, str, VerdictStatus, float, str | None]] = [
    ("script-right", FIZZ_RIGHT, FIZZ_TESTS, VerdictStatus.passed, 1.0, None),
    ("script-wrong", FIZZ_WRONG, FIZZ_TESTS, VerdictStatus.failed, 0.75, "tests_failed"),
    ("pytest-right", STACK_RIGHT, PYTEST_TESTS, VerdictStatus.passed, 1.0, None),
    ("pytest-wrong", STACK_WRONG, PYTEST_TESTS, VerdictStatus.failed, 5 / 6, "tests_failed"),
    (
        "humaneval-style-no-import",
        "def add(a, b):\n    return a + b\n",
        "def test_add():\n    assert add(2, 3) == 5\n",
        VerdictStatus.passed,
        1.0,
        None,
    ),
    (
        "script-without-asserts",
        "def main():\n    return 1 / 0\n",
        "main()\n",
        VerdictStatus.failed,
        0.0,
        "tests_failed",
    ),
    (
        "syntax-error",
        "def fizz(n) return n\n",
        FIZZ_TESTS,
        VerdictStatus.failed,
        0.0,
        "syntax_error",
    ),
    (
        "pytest-solution-import-error",
        "import not_a_module_anywhere\n",
        PYTEST_TESTS,
        VerdictStatus.failed,
        0.0,
        "tests_failed",
    ),
    (
        "wrong-exception",
        "def parse(s):\n    return int(s)\n",
        "def test_parse():\n    assert parse('12') == 12\n\ndef test_bad():\n"
        "    assert parse('x') is None\n",
        VerdictStatus.failed,
        0.5,
        "tests_failed",
    ),
]


@pytest.fixture(scope="module")
def batch_verdicts(tier: SandboxTier, sandbox_pool: Any) -> dict[str, Verdict]:
    """All cases judged in one concurrent batch, as a worker would."""
    items = [Candidate(kind="code", payload={"code": c, "tests": t}) for _, c, t, *_ in CASES]
    verdicts = tier.verify_batch(items, {})
    assert len(verdicts) == len(CASES)
    return {case[0]: v for case, v in zip(CASES, verdicts, strict=True)}


@pytest.mark.parametrize(
    ("name", "status", "score", "reason"),
    [(c[0], c[3], c[4], c[5]) for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_every_verdict_is_right(
    batch_verdicts: dict[str, Verdict],
    name: str,
    status: VerdictStatus,
    score: float,
    reason: str | None,
) -> None:
    verdict = batch_verdicts[name]
    assert verdict.status is status, verdict.feedback
    assert verdict.score == pytest.approx(score)
    assert verdict.reason == reason, verdict.feedback
    assert verdict.tier == "code.sandbox"
    assert verdict.cost.wall_s > 0


def test_per_test_components_and_feedback(batch_verdicts: dict[str, Verdict]) -> None:
    wrong = batch_verdicts["pytest-wrong"]
    assert wrong.components["test:test_push_pop"] == 0.0
    assert wrong.components["test:test_empty_pop_raises"] == 1.0
    assert wrong.components["test:test_len[items2]"] == 1.0
    assert wrong.components["test:TestPeek::test_peek_keeps_item"] == 1.0
    assert wrong.components["tests_passed"] == 5.0
    assert wrong.components["tests_total"] == 6.0
    assert wrong.components["exit_code"] == 1.0
    assert "assert 1 == 2" in wrong.feedback  # the first failure's traceback

    script = batch_verdicts["script-wrong"]
    assert script.components["test:line_4"] == 0.0  # fizz(15) == "FizzBuzz"
    assert script.components["test:line_2"] == 1.0
    assert "AssertionError" in script.feedback
    assert "line 4" in script.feedback

    syntax = batch_verdicts["syntax-error"]
    assert "SyntaxError" in syntax.feedback
    assert "solution.py" in syntax.feedback


def test_stdout_and_stderr_reach_the_feedback(judge: Judge) -> None:
    code = "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\n"
    verdict = judge(code, "assert False, 'boom'\n")
    assert verdict.status is VerdictStatus.failed
    assert "to stdout" in verdict.feedback
    assert "to stderr" in verdict.feedback
    assert "boom" in verdict.feedback


def test_all_or_nothing_scoring(judge: Judge) -> None:
    verdict = judge(FIZZ_WRONG, FIZZ_TESTS, {"scoring": "all_or_nothing"})
    assert verdict.status is VerdictStatus.failed
    assert verdict.score == 0.0
    assert verdict.components["tests_passed"] == 3.0


def test_fail_to_pass_and_pass_to_pass_rule(judge: Judge) -> None:
    tests = (
        "def test_old_behaviour():\n    assert fizz(7) == '7'\n\n"
        "def test_bug_fixed():\n    assert fizz(15) == 'FizzBuzz'\n\n"
        "def test_unrelated_broken():\n    assert False\n"
    )
    rule = {
        "fail_to_pass": ["test_solution.py::test_bug_fixed"],
        "pass_to_pass": ["test_old_behaviour"],
    }
    fixed = judge(FIZZ_RIGHT, tests, **rule)
    assert fixed.status is VerdictStatus.passed, fixed.feedback
    assert fixed.score == 1.0  # an unlisted failing test does not count under the rule
    assert fixed.components["f2p_passed"] == 1.0
    assert fixed.components["p2p_total"] == 1.0

    not_fixed = judge(FIZZ_WRONG, tests, **rule)
    assert not_fixed.status is VerdictStatus.failed
    assert not_fixed.score == 0.0
    assert "f2p test 'test_solution.py::test_bug_fixed' did not pass" in not_fixed.feedback

    broke = judge("def fizz(n):\n    return 'FizzBuzz'\n", tests, **rule)
    assert broke.status is VerdictStatus.failed
    assert broke.components["p2p_passed"] == 0.0


def test_setup_runs_before_the_tests(judge: Judge) -> None:
    setup = "with open('data.txt', 'w') as fh:\n    fh.write('41')\n"
    code = "def answer():\n    return int(open('data.txt').read()) + 1\n"
    verdict = judge(code, "assert answer() == 42\n", setup=setup)
    assert verdict.status is VerdictStatus.passed, verdict.feedback


def test_memory_and_timeout_from_the_payload(judge: Judge) -> None:
    code = "import time\nBIG = bytearray(150 * 1024 * 1024)\ntime.sleep(0.5)\n"
    verdict = judge(code, "assert len(BIG) > 0\n", timeout_s=1.5, memory_mb=300)
    assert verdict.status is VerdictStatus.passed, verdict.feedback


def test_unsupported_language_is_a_failed_verdict(tier: SandboxTier) -> None:
    item = Candidate(kind="code", payload={"language": "cobol", "code": "STOP RUN.", "tests": "x"})
    (verdict,) = tier.verify_batch([item], {})
    assert verdict.status is VerdictStatus.failed
    assert verdict.reason == "unsupported_language"
    assert "cobol" in verdict.feedback


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"code": "x = 1"}, "invalid_payload"),
        ({"code": "x = 1", "tests": "assert x ==", "language": "python"}, "invalid_tests"),
        ({"code": "x" * 600_000, "tests": "assert True"}, "payload_too_large"),
    ],
)
def test_bad_payloads_are_errors_with_a_reason(
    tier: SandboxTier, payload: dict[str, Any], reason: str
) -> None:
    (verdict,) = tier.verify_batch([Candidate(kind="code", payload=payload)], {})
    assert verdict.status is VerdictStatus.error
    assert verdict.reason == reason
    assert verdict.feedback


def test_config_is_validated_with_a_clear_message(tier: SandboxTier) -> None:
    tier.validate_config({"timeout_s": 2, "memory_mb": 256, "scoring": "all_or_nothing"})
    with pytest.raises(ValueError, match="scoring"):
        tier.validate_config({"scoring": "median"})
    with pytest.raises(ValueError, match="timeout"):
        tier.validate_config({"timeout": 2})


def test_registered_and_canonical_payload_is_stable() -> None:
    tier = get_tier("code.sandbox")
    assert isinstance(tier, SandboxTier)
    a = Candidate(
        kind="code",
        payload={"code": "def f():  \r\n    return 1\r\n\r\n", "tests": "assert f() == 1\n"},
    )
    b = Candidate(
        kind="code", payload={"code": "def f():\n    return 1", "tests": "assert f() == 1"}
    )
    assert tier.canonical_payload(a) == tier.canonical_payload(b)
    c = Candidate(
        kind="code", payload={"code": "def f():\n    return 2", "tests": "assert f() == 1"}
    )
    assert tier.canonical_payload(a) != tier.canonical_payload(c)
    # Trailing spaces inside a multi-line string are part of the program.
    assert normalize_source('S = """a  \nb"""\n') == 'S = """a  \nb"""'
