"""The `judge.llm` tier: a model on an OpenAI-compatible server scores a candidate against the
policy step's rubric (a score range, or labels of which some pass), optionally with the
item's reference. docs/judges.md gives every field.

A batch's calls run concurrently on one event loop (each endpoint's max_in_flight at once), so
one worker process holds many requests open. A call that gets no usable answer is an error
verdict naming the endpoint (the ladder makes it infra_error, never a 0); a reply that holds no
reading of the rubric is an error verdict saying so (reason judge_unparseable). Every verdict
carries the `grader_addressed` monitor's components (tiers/judge/monitor.py).
"""

from __future__ import annotations

from typing import ClassVar

from tiers.base import Candidate, Verdict
from tiers.judge.asking import ask
from tiers.judge.batch import candidate_text, watch
from tiers.judge.client import EndpointCaller, EndpointError
from tiers.judge.schemas import JudgeConfig
from tiers.judge.templates import CandidateView, TemplateProblem, fenced, new_fence
from tiers.judge.tier import JudgeTier, chat, check_endpoint

__all__ = ["JudgeLlmTier", "candidate_text", "check_endpoint"]


class JudgeLlmTier(JudgeTier[JudgeConfig]):
    """Scores items with a model judge against a rubric (see the module's docstring)."""

    name: ClassVar[str] = "judge.llm"
    kinds: ClassVar[frozenset[str]] = frozenset({"text", "json"})
    config_model = JudgeConfig

    def _unasked(self, item: Candidate) -> dict[str, float]:
        return watch(candidate_text(item))[0]

    async def _judge_item(
        self, caller: EndpointCaller, cfg: JudgeConfig, item: Candidate
    ) -> Verdict:
        watched, flagged = watch(candidate_text(item))
        if cfg.reference_guided and not item.reference:
            return self._error(
                "no_reference", "this step is reference-guided and the item has no reference",
                watched,
            )  # fmt: skip
        fence = new_fence()
        context = {
            "candidate": CandidateView(item.kind, fenced(candidate_text(item), fence)),
            "reference": dict(item.reference or {}),
            "item": {"metadata": dict(item.metadata or {})},
            "rubric": cfg.rubric.for_template(),
        }
        try:
            answer = await ask(caller, cfg, cfg.rubric, chat(cfg.system, cfg.prompt, context))
        except (EndpointError, TemplateProblem) as exc:
            return self._failure(exc, watched)
        return self.verdict(answer, watched, flagged)
