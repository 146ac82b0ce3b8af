"""The arithmetic task: sums of n-digit numbers answered as `\\boxed{N}`, generated in code.

A question is the prompt `<bos>{a}+{b}=`, its reference the sum (the dataset's `answer` column,
which `TextMapping("answer")` sends to the service as `reference.answer`). The warm start teaches
the answer's shape on a few of them; GRPO, rewarded by the service's `answer` tier, the sums.
A held-out set (never trained on) is answered greedily before and after GRPO: the accuracy
this module computes is a cross-check of the service's reward, never the reward.
"""

from __future__ import annotations

import random
import re
from typing import Any

from trainer.config import ArithmeticConfig

BOXED = re.compile(r"\\boxed\{(-?\d+)\}")


def question(a: int, b: int) -> str:
    return f"{a}+{b}="


def solution(a: int, b: int) -> str:
    return f"\\boxed{{{a + b}}}"


def _pairs(config: ArithmeticConfig, rng: random.Random, n: int) -> list[tuple[int, int]]:
    low, high = 10 ** (config.digits - 1) if config.digits > 1 else 0, 10**config.digits - 1
    return [(rng.randint(low, high), rng.randint(low, high)) for _ in range(n)]


def held_out(config: ArithmeticConfig, seed: int) -> list[tuple[int, int]]:
    """The evaluation questions: a seed of their own, and never in the training pairs."""
    return sorted(set(_pairs(config, random.Random(seed + 7919), config.eval_questions)))


def training_pairs(config: ArithmeticConfig, seed: int, n: int) -> list[tuple[int, int]]:
    """`n` questions drawn from the task's range, the held-out ones left out."""
    rng = random.Random(seed)
    hold = set(held_out(config, seed))
    out: list[tuple[int, int]] = []
    while len(out) < n:
        out.extend(p for p in _pairs(config, rng, n - len(out)) if p not in hold)
    return out


def warm_corpus(config: ArithmeticConfig, seed: int) -> list[str]:
    """Texts of the warm start (`a+b=\\boxed{a+b}`), after the prompt's `<bos>`."""
    pairs = training_pairs(config, seed + 1, config.warm_questions)
    return [question(a, b) + solution(a, b) for a, b in pairs]


def grpo_rows(config: ArithmeticConfig, seed: int, n: int, prefix: str) -> dict[str, list[str]]:
    """The GRPO dataset: `prompt` (`prefix` + question) and `answer` (the sum, as text)."""
    pairs = training_pairs(config, seed + 2, n)
    return {
        "prompt": [prefix + question(a, b) for a, b in pairs],
        "answer": [str(a + b) for a, b in pairs],
    }


def boxed_answer(text: str) -> str | None:
    """The integer in the completion's `\\boxed{}` when the completion is exactly that."""
    found = BOXED.fullmatch(text.strip())
    return found.group(1) if found else None


def arithmetic_accuracy(completions: list[Any], answer: list[str], **_: Any) -> list[float]:
    """1.0 when the completion is exactly `\\boxed{<the sum>}`, else 0.0.

    A zero-weight reward function: it changes no advantage; TRL logs it beside the service's
    reward, as the trainer's own cross-check of the service.
    """
    texts = [c if isinstance(c, str) else str(c[-1]["content"]) for c in completions]
    return [float(boxed_answer(t) == str(a)) for t, a in zip(texts, answer, strict=True)]


def evaluate(
    model: Any,
    tokenizer: Any,
    config: ArithmeticConfig,
    *,
    prefix: str,
    seed: int,
    max_new_tokens: int,
) -> dict[str, float]:
    """Greedy answers to the held-out questions: the share right and the share in `\\boxed{}`."""
    import torch

    pairs = held_out(config, seed)
    right = boxed = 0
    model.eval()
    for start in range(0, len(pairs), 128):
        chunk = pairs[start : start + 128]
        prompts = [prefix + question(a, b) for a, b in chunk]
        inputs = tokenizer(prompts, add_special_tokens=False, return_tensors="pt", padding=True)
        with torch.no_grad():
            output = model.generate(
                **inputs,
                do_sample=False,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        texts = tokenizer.batch_decode(
            output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True
        )
        for (a, b), text in zip(chunk, texts, strict=True):
            found = boxed_answer(text)
            boxed += found is not None
            right += found == str(a + b)
    n = max(len(pairs), 1)
    return {"accuracy": right / n, "boxed": boxed / n, "questions": float(len(pairs))}
