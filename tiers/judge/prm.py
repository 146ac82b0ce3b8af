"""The `judge.prm` tier: a process reward model on an OpenAI-compatible server scores steps.

Two kinds of item:
- a step (or the outcome) of a trajectory: the ladder gives the tier the steps before it with
  their observations (`reads_trajectory`: `Candidate.context`); the judge scores this step given
  them, and the verdict is the step's, so its score becomes the step's reward and the
  trajectory's `step_rewards` (the policy's `trajectory` rule combines them);
- any other text (a chain of thought): split into steps by the step's `split` rule
  (prm_schemas.split_steps), each step judged given the ones before it (concurrently), and the
  steps' scores combined by `step_aggregate`; components `step_1`... hold each step's score
  and `first_bad_step` the first failing one.

Everything the policy wrote (steps, earlier actions) and every observation reaches the prompt
inside a fence made for the call; the grader_addressed monitor reads the judged text. A call
with no usable answer is an error verdict naming the endpoint, as in judge.llm.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import ValidationError

from tiers.base import Candidate, Verdict, VerdictStatus, stable_json
from tiers.judge.asking import Answer, ask
from tiers.judge.batch import candidate_text, watch
from tiers.judge.client import EndpointCaller, EndpointError
from tiers.judge.prm_schemas import PRM_NAMESPACES, PrmConfig, split_steps
from tiers.judge.templates import CandidateView, TemplateProblem, fenced, new_fence
from tiers.judge.tier import JudgeTier, chat


@dataclass(frozen=True)
class _Past:
    """One earlier step as the judge sees it."""

    text: str
    observation: str | None


def _action_text(action: Any) -> str:
    try:
        return candidate_text(Candidate.model_validate(action))
    except ValidationError:
        return stable_json(action)


class JudgePrmTier(JudgeTier[PrmConfig]):
    """Scores each step of a trajectory, or of a chain of thought, with a model judge."""

    name: ClassVar[str] = "judge.prm"
    kinds: ClassVar[frozenset[str]] = frozenset({"text", "json", "code"})
    #: The ladder gives a trajectory's steps their earlier steps (Candidate.context).
    reads_trajectory: ClassVar[bool] = True
    config_model = PrmConfig
    # The context (the steps before) is part of the question: the same step after other
    # steps is judged anew.
    key_fields: ClassVar[tuple[str, ...]] = (*JudgeTier.key_fields, "context")

    # ------------------------------------------------------------------ one item

    async def _judge_item(self, caller: EndpointCaller, cfg: PrmConfig, item: Candidate) -> Verdict:
        text = candidate_text(item)
        watched, flagged = watch(text)
        context = item.context
        metadata = dict(item.metadata or {})
        if context is not None:  # a trajectory's step or outcome
            metadata = {**dict(context.get("metadata") or {}), **metadata}
            past = [
                _Past(_action_text(b.get("action")), b.get("observation"))
                for b in context.get("before") or []
            ]
            index = int(context.get("index", len(past)))
            observation = context.get("observation")
            try:
                answer = await self._ask(
                    caller, cfg, item, metadata, past, text, index, observation
                )
            except (EndpointError, TemplateProblem) as exc:
                return self._failure(exc, watched)
            verdict = self.verdict(answer, watched, flagged, f"step {index + 1}")
            if verdict.status != VerdictStatus.error:
                verdict.components["step_index"] = float(index)
            return verdict
        steps = split_steps(text, cfg.split)
        merged = len(steps) > cfg.max_steps
        if merged:
            steps = [*steps[: cfg.max_steps - 1], "\n".join(steps[cfg.max_steps - 1 :])]
        asks = [
            self._ask(caller, cfg, item, metadata, [_Past(s, None) for s in steps[:i]], s, i, None)
            for i, s in enumerate(steps)
        ]
        results = await asyncio.gather(*asks, return_exceptions=True)
        return self._chain_verdict(cfg, steps, results, watched, flagged, merged)

    async def _ask(
        self,
        caller: EndpointCaller,
        cfg: PrmConfig,
        item: Candidate,
        metadata: dict[str, Any],
        past: list[_Past],
        text: str,
        index: int,
        observation: str | None,
    ) -> Answer:
        fence = new_fence()
        shown: list[dict[str, Any]] = []
        budget = cfg.max_history_chars
        for number, step in reversed(list(enumerate(past, start=1))):
            size = len(step.text) + len(step.observation or "")
            if size > budget:
                break
            budget -= size
            shown.insert(
                0,
                {
                    "number": number,
                    "action": fenced(step.text, fence),
                    "observation": None
                    if step.observation is None
                    else fenced(step.observation, fence),
                },
            )
        values = {
            "candidate": CandidateView(item.kind, fenced(text, fence)),
            "reference": dict(item.reference or {}),
            "item": {"metadata": metadata},
            "rubric": cfg.rubric.for_template(),
            "history": shown,
            "step": {
                "number": index + 1,
                "observation": None if observation is None else fenced(observation, fence),
                "omitted": len(past) - len(shown),
            },
        }
        messages = chat(cfg.system, cfg.prompt, values, PRM_NAMESPACES)
        return await ask(caller, cfg, cfg.rubric, messages)

    # ------------------------------------------------------------------ verdicts

    def _chain_verdict(
        self,
        cfg: PrmConfig,
        steps: list[str],
        results: list[Answer | BaseException],
        watched: dict[str, float],
        flagged: str,
        merged: bool,
    ) -> Verdict:
        components = dict(watched)
        for key in ("prompt_tokens", "completion_tokens", "cost_units"):
            parts = [
                r.components[key] for r in results if isinstance(r, Answer) and key in r.components
            ]
            if parts:
                components[key] = sum(parts)
        for number, result in enumerate(results, start=1):
            if isinstance(result, BaseException):  # no answer for one step: no score for all
                verdict = self._failure(result, components)
                verdict.feedback = f"step {number} of {len(steps)}: {verdict.feedback}"
                return verdict
            if result.unparseable is not None or result.score is None:
                message = f"step {number} of {len(steps)}: {result.unparseable}"
                return self._error("judge_unparseable", message, components, result.models)
        answers = [r for r in results if isinstance(r, Answer)]
        scores = [a.score for a in answers if a.score is not None]
        for number, score in enumerate(scores, start=1):
            components[f"step_{number}"] = score
        bad = next((n for n, a in enumerate(answers, start=1) if not a.passed), 0)
        components["steps"] = float(len(steps))
        components["first_bad_step"] = float(bad)
        score = cfg.combine(scores)
        passed = score >= cfg.pass_mark()
        components["passed"] = 1.0 if passed else 0.0
        uncertainties = [a.uncertainty for a in answers if a.uncertainty is not None]
        notes = [
            f"judge: {len(steps)} steps ({cfg.split} split), scores "
            + ", ".join(f"{s:.2f}" for s in scores)
            + f", {cfg.step_aggregate} {score:.3f}"
        ]
        if bad:
            notes.append(f"first failing step: {bad}")
        if merged:
            notes.append(f"steps after {cfg.max_steps - 1} judged as one (max_steps)")
        if flagged:
            notes.append(flagged)
        models = [m for a in answers for m in a.models]
        uncertainty = max(uncertainties) if uncertainties else None
        return self._judged(passed, score, components, notes, models, uncertainty)
