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

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import ValidationError

from tiers.base import Candidate, Verdict, VerdictStatus, stable_json
from tiers.judge.asking import Answer, ask
from tiers.judge.batch import (
    candidate_text,
    endpoint_models,
    error_verdict,
    run_sync,
    share_cpu,
    timed,
    watch,
    with_caller,
)
from tiers.judge.client import EndpointCaller, EndpointError
from tiers.judge.recorded import note
from tiers.judge.schemas import JudgeConfig
from tiers.judge.settings import JudgeSettings
from tiers.judge.templates import CandidateView, TemplateProblem, fenced, new_fence, render

__all__ = ["JudgeLlmTier", "candidate_text", "check_endpoint"]


def check_endpoint(settings: JudgeSettings, name: str) -> None:
    """ValueError (at the field `endpoint`) when no endpoint of that name is configured."""
    if name not in settings.endpoints:
        known = ", ".join(sorted(settings.endpoints)) or "none"
        raise ValueError(
            f"endpoint: no judge endpoint named {name!r} is configured (configured: "
            f"{known}); the operator names endpoints in the judge settings"
        )


class JudgeLlmTier:
    """Scores items with a model judge against a rubric (see the module's docstring)."""

    name: ClassVar[str] = "judge.llm"
    version: ClassVar[str] = "1"
    queue: ClassVar[str] = "tier.judge"
    cost_class: ClassVar[float] = 0.01
    kinds: ClassVar[frozenset[str]] = frozenset({"text", "json"})
    # The key is a hash of the candidate's JSON text (metadata included: templates read it).
    cheap_canonical_payload: ClassVar[bool] = True
    settings_model: ClassVar[type[JudgeSettings]] = JudgeSettings

    def __init__(self, settings: JudgeSettings | None = None) -> None:
        self.settings = settings or JudgeSettings()

    def validate_config(self, config: Mapping[str, Any]) -> None:
        try:
            cfg = JudgeConfig.model_validate(dict(config))
        except ValidationError as exc:
            raise ValueError(str(exc)) from None
        check_endpoint(self.settings, cfg.endpoint)

    def canonical_payload(self, item: Candidate) -> str:
        # The config (templates, sampling, endpoint name) is in the key already; the model each
        # endpoint serves is not, so it is added here: a new model is a new judge.
        return stable_json(
            {
                "kind": item.kind,
                "payload": item.payload,
                "reference": item.reference,
                "metadata": item.metadata,
                "models": endpoint_models(self.settings),
            }
        )

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        cfg = JudgeConfig.model_validate(dict(config))
        cpu0 = time.process_time()
        return share_cpu(run_sync(lambda: self._judge_all(items, cfg)), cpu0)

    async def _judge_all(self, items: Sequence[Candidate], cfg: JudgeConfig) -> list[Verdict]:
        async def work(caller: EndpointCaller) -> list[Verdict]:
            judged = (
                timed(self.name, self.version, self._judge_one(caller, cfg, i)) for i in items
            )
            return list(await asyncio.gather(*judged))

        def unconfigured(message: str) -> list[Verdict]:
            return [self._error("endpoint_not_configured", message, i) for i in items]

        return await with_caller(self.settings, cfg.endpoint, work, unconfigured)

    async def _judge_one(
        self, caller: EndpointCaller, cfg: JudgeConfig, item: Candidate
    ) -> Verdict:
        watched, flagged = watch(candidate_text(item))
        if cfg.reference_guided and not item.reference:
            return self._error(
                "no_reference", "this step is reference-guided and the item has no reference",
                item, watched,
            )  # fmt: skip
        fence = new_fence()
        context = {
            "candidate": CandidateView(item.kind, fenced(candidate_text(item), fence)),
            "reference": dict(item.reference or {}),
            "item": {"metadata": dict(item.metadata or {})},
            "rubric": cfg.rubric.for_template(),
        }
        try:
            messages = [
                {"role": "system", "content": render(cfg.system, context)},
                {"role": "user", "content": render(cfg.prompt, context)},
            ]
        except TemplateProblem as exc:
            return self._error("template_error", f"the judge's prompt {exc}", item, watched)
        try:
            answer = await ask(caller, cfg, cfg.rubric, messages)
        except EndpointError as exc:
            return self._error(exc.reason, str(exc), item, watched)
        return self.verdict(answer, watched, flagged)

    def verdict(self, answer: Answer, watched: dict[str, float], flagged: str) -> Verdict:
        """The verdict of an answer, with the monitor's components and feedback."""
        components = watched | answer.components
        if answer.unparseable is not None or answer.score is None:
            return self._error(
                "judge_unparseable", answer.unparseable or "", None, components, answer.models
            )
        notes = ["judge: " + "; ".join(answer.notes)] if answer.notes else []
        if flagged:
            notes.append(flagged)
        return Verdict(
            status=VerdictStatus.passed if answer.passed else VerdictStatus.failed,
            score=answer.score,
            uncertainty=answer.uncertainty,
            components=components,
            reason=None if answer.passed else "judged_failing",
            feedback=note("; ".join(notes), answer.models),  # which model judged: last line
            tier=self.name,
            tier_version=self.version,
        )

    def _error(
        self,
        reason: str,
        message: str,
        item: Candidate | None = None,
        components: dict[str, float] | None = None,
        models: Sequence[str] = (),
    ) -> Verdict:
        if components is None and item is not None:
            components = watch(candidate_text(item))[0]
        return error_verdict(self.name, self.version, reason, message, components, models)
