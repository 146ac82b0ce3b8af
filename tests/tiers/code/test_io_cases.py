"""stdin/stdout cases: checkers run in the judge, the expected output never reaches the
candidate, and the feedback names the first failing case with a capped diff."""

from __future__ import annotations

from collections.abc import Callable

from tiers.base import Verdict, VerdictStatus

Judge = Callable[..., Verdict]

SUM = "import sys\nprint(sum(int(t) for t in sys.stdin.read().split()))\n"
CASES = [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "10 -4 5\n", "stdout": "11\n"}]


def test_tokens_checker_passes_an_honest_program(judge: Judge) -> None:
    verdict = judge(SUM, "", cases=CASES)
    assert verdict.status is VerdictStatus.passed, verdict.feedback
    assert verdict.score == 1.0
    assert verdict.components["tests_total"] == 2.0


def test_a_wrong_case_is_named_with_a_diff(judge: Judge) -> None:
    code = "import sys\nxs = sys.stdin.read().split()\nprint(int(xs[0]) + int(xs[1]))\n"
    verdict = judge(code, "", cases=CASES)
    assert verdict.score == 0.5
    assert verdict.reason == "tests_failed"
    assert "case_2: wrong answer" in verdict.feedback
    assert "-11" in verdict.feedback
    assert "+6" in verdict.feedback
    all_or_nothing = judge(code, "", {"scoring": "all_or_nothing"}, cases=CASES)
    assert all_or_nothing.score == 0.0


def test_float_exact_and_special_checkers(judge: Judge) -> None:
    third = "print(1 / 3)\n"
    cases = [{"stdin": "", "stdout": "0.333333\n"}]
    assert judge(third, "", cases=cases, checker="float", abs_tol=1e-5).score == 1.0
    assert judge(third, "", cases=cases, checker="float", abs_tol=1e-9, rel_tol=1e-9).score == 0
    assert judge("print('3 ')\n", "", cases=[{"stdout": "3\n"}], checker="exact").score == 0.0
    assert judge("print('3')\n", "", cases=[{"stdout": "3"}], checker="exact").score == 1.0
    # Any permutation of 1..n is accepted by this special judge, which runs in the judge.
    checker = (
        "def check(stdin, output, expected):\n"
        "    n = int(stdin)\n"
        "    return sorted(map(int, output.split())) == list(range(1, n + 1))\n"
    )
    perm = "n = int(input())\nprint(*reversed(range(1, n + 1)))\n"
    special = judge(perm, "", cases=[{"stdin": "4", "stdout": "1 2 3 4"}], checker="special",
                    checker_code=checker)  # fmt: skip
    assert special.score == 1.0, special.feedback


def test_a_case_over_its_time_limit_fails(judge: Judge) -> None:
    code = "import time\ntime.sleep(1.5)\nprint(3)\n"
    verdict = judge(code, "", cases=CASES[:1], case_timeout_s=0.5)
    assert verdict.score == 0.0
    assert "time limit" in verdict.feedback


def test_the_expected_output_is_out_of_the_candidates_reach(judge: Judge) -> None:
    # It prints whatever it can find that looks like an expected output: nothing of the judge's.
    code = (
        "import glob, os\nfound = ''\n"
        "for path in glob.glob('/judge/**', recursive=True) + ['/proc/1/cmdline', '/proc/1/mem']:\n"
        "    try:\n        found += open(path, errors='replace').read()\n"
        "    except Exception:\n        pass\n"
        "print('99173' if '99173' in found else 'no')\n"
    )
    verdict = judge(code, "", cases=[{"stdin": "", "stdout": "99173\n"}])
    assert verdict.score == 0.0
    assert verdict.status is VerdictStatus.failed
