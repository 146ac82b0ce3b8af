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
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import httpx
from pydantic import ValidationError

from tiers.base import Candidate, Cost, Verdict, VerdictStatus, stable_json
from tiers.judge import monitor
from tiers.judge.client import EndpointCaller, EndpointError
from tiers.judge.parse import Reading, Unparseable, parse_reply
from tiers.judge.schemas import JudgeConfig
from tiers.judge.settings import JudgeSettings
from tiers.judge.templates import CandidateView, TemplateProblem, fenced, new_fence, render


def candidate_text(item: Candidate) -> str:
    """The text a judge reads: a text item's text, else the payload as JSON."""
    if item.kind == "text":
        return str(item.payload.get("text", ""))
    return stable_json(item.payload)


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
        if cfg.endpoint not in self.settings.endpoints:
            known = ", ".join(sorted(self.settings.endpoints)) or "none"
            raise ValueError(
                f"endpoint: no judge endpoint named {cfg.endpoint!r} is configured (configured: "
                f"{known}); the operator names endpoints in the judge settings"
            )

    def canonical_payload(self, item: Candidate) -> str:
        # The config (templates, sampling, endpoint name) is in the key already; the model each
        # endpoint serves is not, so it is added here: a new model is a new judge.
        models = {name: e.model for name, e in sorted(self.settings.endpoints.items())}
        return stable_json(
            {
                "kind": item.kind,
                "payload": item.payload,
                "reference": item.reference,
                "metadata": item.metadata,
                "models": models,
            }
        )

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        cfg = JudgeConfig.model_validate(dict(config))
        cpu0 = time.process_time()
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a worker's thread, as usual: its own loop for this batch
            verdicts = asyncio.run(self._judge_all(items, cfg))
        else:  # called from inside an event loop: the batch's loop runs in a thread of its own
            with ThreadPoolExecutor(1) as pool:
                verdicts = pool.submit(asyncio.run, self._judge_all(items, cfg)).result()
        share = (time.process_time() - cpu0) / max(len(items), 1)
        for verdict in verdicts:
            verdict.cost = Cost(cpu_s=share, wall_s=verdict.cost.wall_s)
        return verdicts

    # ------------------------------------------------------------------ one batch

    async def _judge_all(self, items: Sequence[Candidate], cfg: JudgeConfig) -> list[Verdict]:
        endpoint = self.settings.endpoints.get(cfg.endpoint)
        if endpoint is None:
            known = ", ".join(sorted(self.settings.endpoints)) or "none"
            message = (
                f"judge endpoint {cfg.endpoint!r} is not configured in this worker (configured:"
                f" {known})"
            )
            return [self._error("endpoint_not_configured", message, i) for i in items]
        limits = httpx.Limits(max_connections=endpoint.max_in_flight)
        async with httpx.AsyncClient(limits=limits) as client:
            caller = EndpointCaller(cfg.endpoint, endpoint, self.settings, client)
            return list(await asyncio.gather(*(self._judge(caller, cfg, i) for i in items)))

    async def _judge(self, caller: EndpointCaller, cfg: JudgeConfig, item: Candidate) -> Verdict:
        started = time.perf_counter()
        try:
            verdict = await self._judge_one(caller, cfg, item)
        except Exception as exc:  # a bug must not lose the rest of the batch
            verdict = self._error(
                "internal_error", f"{self.name} failed on this item: {type(exc).__name__}: {exc}"
            )
        verdict.cost = Cost(wall_s=time.perf_counter() - started)
        return verdict

    async def _judge_one(
        self, caller: EndpointCaller, cfg: JudgeConfig, item: Candidate
    ) -> Verdict:
        text = candidate_text(item)
        flags = monitor.scan(text)
        watch = monitor.components(flags)
        if cfg.reference_guided and not item.reference:
            return self._error(
                "no_reference", "this step is reference-guided and the item has no reference",
                item, watch,
            )  # fmt: skip
        fence = new_fence()
        context = {
            "candidate": CandidateView(item.kind, fenced(text, fence)),
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
            return self._error("template_error", f"the judge's prompt {exc}", item, watch)
        body: dict[str, Any] = {
            "model": caller.endpoint.model,
            "messages": messages,
            **cfg.sampling(),
        }
        if cfg.structured == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "verdict", "schema": cfg.response_schema(), "strict": True},
            }
        elif cfg.structured == "json_object":
            body["response_format"] = {"type": "json_object"}
        try:
            completion = await caller.complete(body)
        except EndpointError as exc:
            return self._error(exc.reason, str(exc), item, watch)
        prices = caller.endpoint
        usage = {
            "prompt_tokens": float(completion.prompt_tokens),
            "completion_tokens": float(completion.completion_tokens),
            "cost_units": (
                completion.prompt_tokens * prices.price_per_1k_prompt
                + completion.completion_tokens * prices.price_per_1k_completion
            )
            / 1000,
            "attempts": float(completion.attempts),
        }
        try:
            reading = parse_reply(completion.text, cfg.rubric)
        except Unparseable as exc:
            return self._error("judge_unparseable", str(exc), item, watch | usage)
        return self._scored(reading, cfg, watch | usage, monitor.feedback(flags))

    # ------------------------------------------------------------------ verdicts

    def _scored(
        self, reading: Reading, cfg: JudgeConfig, components: dict[str, float], flagged: str
    ) -> Verdict:
        rubric = cfg.rubric
        if rubric.labels is not None:
            assert reading.label is not None
            score = rubric.labels.score_of(reading.label)
            passed = reading.label in rubric.labels.passing
            components["label_index"] = float(rubric.labels.values.index(reading.label))
            said = f"label {reading.label}"
        else:
            assert rubric.scale is not None
            assert reading.score is not None
            scale = rubric.scale
            score = (reading.score - scale.min) / (scale.max - scale.min)
            passed = reading.score >= scale.threshold
            components["raw_score"] = reading.score
            said = f"score {reading.score:g} of {scale.min:g}..{scale.max:g}"
        components["passed"] = 1.0 if passed else 0.0
        if reading.confidence is not None:
            components["confidence"] = reading.confidence
        how = "" if reading.how == "json" else f" (read from {reading.how})"
        notes = [f"judge: {said}{how}"]
        if flagged:
            notes.append(flagged)
        return Verdict(
            status=VerdictStatus.passed if passed else VerdictStatus.failed,
            score=score,
            # The judge's own word on how sure it is: not calibrated (docs/judges.md).
            uncertainty=None if reading.confidence is None else 1.0 - reading.confidence,
            components=components,
            reason=None if passed else "judged_failing",
            feedback="; ".join(notes),
            tier=self.name,
            tier_version=self.version,
        )

    def _error(
        self,
        reason: str,
        message: str,
        item: Candidate | None = None,
        components: dict[str, float] | None = None,
    ) -> Verdict:
        if components is None and item is not None:
            components = monitor.components(monitor.scan(candidate_text(item)))
        return Verdict(
            status=VerdictStatus.error,
            reason=reason,
            feedback=message,
            components=components or {},
            tier=self.name,
            tier_version=self.version,
        )
