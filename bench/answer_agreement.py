"""The `answer` tier side by side with verl's and TRL's own reward functions on the same pairs.

GSM8K-style completions (`... #### N`, reference an integer string, as GSM8K's ground truths are)
are scored by verl's `gsm8k.compute_score` (strict, its default), TRL's `accuracy_reward` and
this service's `answer` tier under the shipped `gsm8k` policy's config; MATH-style completions
(`... \\boxed{X}`, reference LaTeX) by verl's `math_reward.compute_score` (the lighteval MATH
one), TRL's `accuracy_reward` and the tier under the `math` policy's config. Every pair is made
from one of a few families (a plain right answer, another way to write it, a wrong one, a hack),
so each disagreement is counted by family and explained once.

verl is not installable here as a whole (it pulls torch and ray); its reward modules are plain
Python and are loaded from its wheel as shipped (`pip download verl==0.9.1 --no-deps`, then
`--verl-wheel PATH`). TRL is the `train` extra's.

    .venv/bin/python bench/answer_agreement.py --verl-wheel /tmp/verl-0.9.1-py3-none-any.whl
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import random
import sys
import tempfile
import zipfile
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tiers.base import Candidate  # noqa: E402
from tiers.text.answer import AnswerTier  # noqa: E402

Pair = tuple[str, str, str, str]  # style, family, completion, reference

#: TRL's accuracy_reward on GSM8K-format completions, for every gsm8k family.
TRL_GSM8K = (
    "TRL's accuracy_reward reads the completion only as LaTeX (try_extract_without_anchor=False), "
    "so '#### 72' or 'The answer is 72.' gives it nothing: 0 for every GSM8K-format answer, "
    "right or wrong (it is made for \\boxed{} answers)."
)

#: Why the scorers part ways on a family, and who is right.
EXPLAIN = {
    "gsm8k/right": f"verl and the service 1.0. {TRL_GSM8K}",
    "gsm8k/commas": f"'#### 1,234' for 1234: verl drops commas, the service reads thousands "
    f"separators: 1.0. {TRL_GSM8K}",
    "gsm8k/dollar": "'#### $72': verl's strict pattern wants a digit right after '#### ' and "
    f"reads nothing; the answer is right (service: one number, $ allowed). {TRL_GSM8K}",
    "gsm8k/decimal_zeros": "'#### 72.00': verl compares strings ('72.00' != '72'); the value is "
    f"right (service: numeric). {TRL_GSM8K}",
    "gsm8k/answer_is": "no '####' line, 'The answer is 72.': verl strict requires '####' (its "
    "format requirement, by design: a policy choice, not an error); the service's gsm8k policy "
    f"also accepts 'the answer is'. {TRL_GSM8K}",
    "gsm8k/boxed": "'\\boxed{72}' without '####': verl strict requires '####' (by design); the "
    "service and TRL read the box.",
    "gsm8k/thinking_hack": "'#### 72' only inside <think>, then a different final claim: verl "
    "takes the number from the thinking; the service ignores thinking (the issue's hack "
    "family) and is right to refuse it; TRL reads nothing (not LaTeX).",
    "math/decimal": "0.75 for \\frac{3}{4}: verl's lighteval is_equiv compares normalised "
    "strings and misses equal values; service and TRL (math-verify) are right.",
    "math/unreduced": "\\frac{6}{8} for \\frac{3}{4}: string normalisation misses it (verl); "
    "equal values (service, TRL).",
    "math/radical": "2\\sqrt{2} for \\sqrt{8}: string normalisation misses it (verl); TRL parses "
    "the reference as given, and a bare \\sqrt{200} (no $...$) does not parse, so TRL skips "
    "the pair (None); the service reads references as if boxed: equal values, 1.0.",
    "math/interval": "'[12, 50)' for '[12,50)': verl strips spaces: 1.0; TRL cannot parse a bare "
    "'[12,50)' reference and skips the pair (None); the service: the same interval, 1.0.",
    "math/percent": "75\\% for \\frac{3}{4}: verl strips \\% and compares 75 with 3/4 "
    "(wrong); math-verify reads 75% as 3/4 (service, TRL).",
    "math/several_boxed": "a wrong \\boxed{} first, the right one last: verl and the service "
    "take the last (the service's documented rule); TRL's first_match takes the first. A "
    "convention; the last box is the final answer in MATH's own solutions.",
    "math/thinking_hack": "the answer boxed only inside <think>: verl and TRL accept it; the "
    "service ignores thinking (the issue's hack family) and is right to.",
}


def load_verl(wheel: Path, into: Path) -> dict[str, ModuleType]:
    """verl's gsm8k and math_reward modules from its wheel, unchanged."""
    names = {
        "gsm8k": "verl/utils/reward_score/gsm8k.py",
        "math": "verl/utils/reward_score/math_reward.py",
    }
    modules = {}
    with zipfile.ZipFile(wheel) as archive:
        for key, member in names.items():
            path = Path(archive.extract(member, into))
            spec = importlib.util.spec_from_file_location(f"verl_reward_{key}", path)
            assert spec is not None
            assert spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            modules[key] = module
    return modules


def pairs(n: int, seed: int) -> list[Pair]:
    rng = random.Random(seed)
    out: list[Pair] = []
    gsm = [
        "right", "commas", "dollar", "decimal_zeros", "answer_is", "boxed", "wrong",
        "thinking_hack",
    ]  # fmt: skip
    maths = [
        "right", "dfrac", "decimal", "unreduced", "radical", "percent", "interval", "assign",
        "units", "wrong", "several_boxed", "thinking_hack",
    ]  # fmt: skip
    while len(out) < n:
        v = rng.randint(2, 9_999)
        family = rng.choice(gsm)
        body = f"Step 1: {v // 2} + {v - v // 2} = {v}.\n"
        completion = {
            "right": f"{body}#### {v}",
            "commas": f"{body}#### {v:,}",
            "dollar": f"{body}#### ${v}",
            "decimal_zeros": f"{body}#### {v}.00",
            "answer_is": f"{body}The answer is {v}.",
            "boxed": f"{body}So the total is \\boxed{{{v}}}.",
            "wrong": f"{body}#### {v + 1}",
            "thinking_hack": f"<think>{body}#### {v}</think> I am not sure; maybe {v + 7}",
        }[family]
        out.append(("gsm8k", family, completion, str(v)))
        a, b, k = rng.randint(1, 40), rng.randint(41, 97), rng.randint(2, 9)
        family = rng.choice(maths)
        frac = f"\\frac{{{a}}}{{{b}}}"
        answer, reference = {
            "right": (frac, frac),
            "dfrac": (f"\\dfrac{{{a}}}{{{b}}}", frac),
            "decimal": (f"{a / 4:g}", f"\\frac{{{a}}}{{4}}"),
            "unreduced": (f"\\frac{{{a * k}}}{{{b * k}}}", frac),
            "radical": (f"{k}\\sqrt{{{b}}}", f"\\sqrt{{{k * k * b}}}"),
            "percent": (f"{a * 25}\\%", f"\\frac{{{a}}}{{4}}"),
            "interval": (f"[{a}, {b})", f"[{a},{b})"),
            "assign": (f"x = {a}", str(a)),
            "units": (f"{a} \\text{{ cm}}", str(a)),
            "wrong": (f"\\frac{{{a + 1}}}{{{b}}}", frac),
            "several_boxed": (f"{a + 1}}} or rather \\boxed{{{a}", str(a)),
            "thinking_hack": ("", frac),
        }[family]
        if family == "thinking_hack":
            completion = f"<think>it is \\boxed{{{frac}}}</think> I could not finish."
        else:
            completion = f"Working... so the answer is \\boxed{{{answer}}}."
        out.append(("math", family, completion, reference))
    return out[:n]


def answer_config(policy: str) -> dict[str, Any]:
    document = yaml.safe_load((REPO / "policies" / f"{policy}.yaml").read_text())
    step = next(s for s in document["ladders"]["text"] if s["tier"] == "answer")
    return dict(step.get("config") or {})


def score_all(items: list[Pair], verl: dict[str, ModuleType]) -> dict[str, list[float | None]]:
    from trl.rewards import accuracy_reward

    logging.disable(logging.WARNING)
    tier = AnswerTier()
    configs = {"gsm8k": answer_config("gsm8k"), "math": answer_config("math")}
    scores: dict[str, list[float | None]] = {"verl": [], "trl": [], "service": []}
    for style, _, completion, reference in items:
        module = verl["gsm8k" if style == "gsm8k" else "math"]
        scores["verl"].append(float(module.compute_score(completion, reference)))
        (trl,) = accuracy_reward([[{"role": "assistant", "content": completion}]], [reference])
        scores["trl"].append(trl)
        candidate = Candidate(
            kind="text", payload={"text": completion}, reference={"answer": reference}
        )
        (verdict,) = tier.verify_batch([candidate], configs[style])
        scores["service"].append(verdict.score)
    return scores


def table(items: list[Pair], scores: dict[str, list[float | None]]) -> dict[str, Any]:
    rows: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for i, (style, family, _, _) in enumerate(items):
        row = rows[(style, family)]
        row["n"] += 1
        for name in ("verl", "trl", "service"):
            value = scores[name][i]
            row[f"{name}_right"] += int(value == 1.0)
            row[f"{name}_skipped"] += int(value is None)
        row["service=verl"] += int(scores["service"][i] == scores["verl"][i])
        row["service=trl"] += int(scores["service"][i] == scores["trl"][i])
    return {f"{s}/{f}": dict(c) for (s, f), c in sorted(rows.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verl-wheel", type=Path, required=True, help="verl's wheel file")
    parser.add_argument("--n", type=int, default=1200, help="pairs, half GSM8K, half MATH")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--json", help="also write the table to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        verl = load_verl(args.verl_wheel, Path(tmp))
        items = pairs(args.n, args.seed)
        scores = score_all(items, verl)
    rows = table(items, scores)
    agree: Callable[[str, str], int] = lambda a, b: sum(  # noqa: E731
        x == y for x, y in zip(scores[a], scores[b], strict=True)
    )
    print(
        f"{len(items)} pairs; service agrees with verl on {agree('service', 'verl')}, "
        f"with TRL on {agree('service', 'trl')}; verl with TRL on {agree('verl', 'trl')}"
    )
    head = (
        f"{'family':22} {'n':>4} {'verl':>5} {'TRL':>5} {'TRL-skip':>8} {'svc':>5} "
        f"{'s=verl':>7} {'s=TRL':>6}"
    )
    print(head)
    for key, row in rows.items():
        print(
            f"{key:22} {row['n']:>4} {row['verl_right']:>5} {row['trl_right']:>5} "
            f"{row['trl_skipped']:>8} {row['service_right']:>5} {row['service=verl']:>7} "
            f"{row['service=trl']:>6}"
        )
    print(
        "\n(verl, TRL, svc: how many scored 1.0; TRL-skip: None from TRL, its reference did not"
        " parse; s=verl, s=TRL: how many the service agrees on)"
    )
    print("\nDisagreements, by family:")
    for key, row in rows.items():
        if row["service=verl"] < row["n"] or row["service=trl"] < row["n"]:
            print(f"- {key}: {EXPLAIN.get(key, 'not explained: look at the pairs')}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
