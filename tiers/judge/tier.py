"""What the judge tiers (`judge.llm`, `judge.prm`, `judge.rank`) share as tiers: the class
attributes, the config check, the cache key, the batch run, and the verdicts they make.

A tier subclasses `JudgeTier`, names its config model and the candidate fields its cache key
holds, and writes what differs: how one item is judged (`_judge_item`), or, for a tier that
judges items together, the whole batch (`_judge_all`). Every verdict it makes here ends with the
tier's own `judge_model` line (tiers/judge/recorded.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast

from pydantic import BaseModel, ValidationError

from tiers.base import Candidate, Verdict, VerdictStatus, stable_json
from tiers.judge.asking import Answer
from tiers.judge.batch import (
    endpoint_models,
    error_verdict,
    run_sync,
    share_cpu,
    timed,
    with_caller,
)
from tiers.judge.client import EndpointCaller, EndpointError
from tiers.judge.recorded import note
from tiers.judge.settings import JudgeSettings
from tiers.judge.templates import NAMESPACES, TemplateProblem, render


class StepConfig(Protocol):
    """A judge step's config: it names the endpoint it asks."""

    @property
    def endpoint(self) -> str: ...


ConfigT = TypeVar("ConfigT", bound=StepConfig)


def check_endpoint(settings: JudgeSettings, name: str) -> None:
    """ValueError (at the field `endpoint`) when no endpoint of that name is configured."""
    if name not in settings.endpoints:
        known = ", ".join(sorted(settings.endpoints)) or "none"
        raise ValueError(
            f"endpoint: no judge endpoint named {name!r} is configured (configured: "
            f"{known}); the operator names endpoints in the judge settings"
        )


def chat(
    system: str,
    prompt: str,
    values: Mapping[str, Any],
    namespaces: tuple[str, ...] = NAMESPACES,
) -> list[dict[str, str]]:
    """The system and user messages of a question; TemplateProblem when one cannot render."""
    return [
        {"role": "system", "content": render(system, values, namespaces)},
        {"role": "user", "content": render(prompt, values, namespaces)},
    ]


class JudgeTier(Generic[ConfigT]):
    """The part every judge tier shares (see the module's docstring)."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    queue: ClassVar[str] = "tier.judge"
    cost_class: ClassVar[float] = 0.01
    # The key is a hash of the candidate's JSON text (metadata included: templates read it).
    cheap_canonical_payload: ClassVar[bool] = True
    settings_model: ClassVar[type[JudgeSettings]] = JudgeSettings
    #: The step config's model.
    config_model: ClassVar[type[BaseModel]]
    #: The candidate's fields in the cache key (each endpoint's model is added).
    key_fields: ClassVar[tuple[str, ...]] = ("kind", "payload", "reference", "metadata")

    def __init__(self, settings: JudgeSettings | None = None) -> None:
        self.settings = settings or JudgeSettings()

    def _config(self, config: Mapping[str, Any]) -> ConfigT:
        return cast(ConfigT, self.config_model.model_validate(dict(config)))

    def validate_config(self, config: Mapping[str, Any]) -> None:
        try:
            cfg = self._config(config)
        except ValidationError as exc:
            raise ValueError(str(exc)) from None
        check_endpoint(self.settings, cfg.endpoint)

    def canonical_payload(self, item: Candidate) -> str:
        # The config (templates, sampling, endpoint name) is in the key already; the model each
        # endpoint serves is not, so it is added here: a new model is a new judge.
        key: dict[str, Any] = {field: getattr(item, field) for field in self.key_fields}
        return stable_json({**key, "models": endpoint_models(self.settings)})

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        cfg = self._config(config)
        cpu0 = time.process_time()
        return share_cpu(run_sync(lambda: self._judge_all(items, cfg)), cpu0)

    async def _judge_all(self, items: Sequence[Candidate], cfg: ConfigT) -> list[Verdict]:
        """Each item judged on its own, concurrently, with one caller of the step's endpoint."""

        async def work(caller: EndpointCaller) -> list[Verdict]:
            judged = (
                timed(self.name, self.version, self._judge_item(caller, cfg, i)) for i in items
            )
            return list(await asyncio.gather(*judged))

        def unconfigured(message: str) -> list[Verdict]:
            return [
                self._error("endpoint_not_configured", message, self._unasked(i)) for i in items
            ]

        return await with_caller(self.settings, cfg.endpoint, work, unconfigured)

    async def _judge_item(self, caller: EndpointCaller, cfg: ConfigT, item: Candidate) -> Verdict:
        raise NotImplementedError(f"{self.name} judges its batch in _judge_all")

    def _unasked(self, item: Candidate) -> dict[str, float] | None:  # noqa: ARG002
        """The components of an item no endpoint was asked about (none by default)."""
        return None

    # ------------------------------------------------------------------ verdicts

    def verdict(
        self, answer: Answer, watched: dict[str, float], flagged: str, what: str | None = None
    ) -> Verdict:
        """The verdict of an answer, with the monitor's components and feedback; `what` names
        the part judged ("step 2") where the answer is of a part."""
        components = watched | answer.components
        if answer.unparseable is not None or answer.score is None:
            message = answer.unparseable or ""
            if what is not None:
                message = f"{what}: {answer.unparseable}"
            return self._error("judge_unparseable", message, components, answer.models)
        head = "judge" if what is None else f"judge, {what}"
        notes = [f"{head}: " + "; ".join(answer.notes)] if answer.notes or what else []
        if flagged:
            notes.append(flagged)
        return self._judged(
            answer.passed, answer.score, components, notes, answer.models, answer.uncertainty
        )

    def _judged(
        self,
        passed: bool,
        score: float,
        components: dict[str, float],
        notes: list[str],
        models: Iterable[str | None],
        uncertainty: float | None = None,
        failing: str = "judged_failing",
    ) -> Verdict:
        """A passed or failed verdict; its feedback's last line names the models that judged."""
        return Verdict(
            status=VerdictStatus.passed if passed else VerdictStatus.failed,
            score=score,
            uncertainty=uncertainty,
            components=components,
            reason=None if passed else failing,
            feedback=note("; ".join(notes), models),
            tier=self.name,
            tier_version=self.version,
        )

    def _failure(self, exc: BaseException, components: dict[str, float] | None) -> Verdict:
        """The error verdict of a question that got no answer (or could not be asked)."""
        if isinstance(exc, EndpointError):
            return self._error(exc.reason, str(exc), components)
        if isinstance(exc, TemplateProblem):
            return self._error("template_error", f"the judge's prompt {exc}", components)
        return self._error("internal_error", f"{type(exc).__name__}: {exc}", components)

    def _error(
        self,
        reason: str,
        message: str,
        components: dict[str, float] | None = None,
        models: Sequence[str] = (),
    ) -> Verdict:
        return error_verdict(self.name, self.version, reason, message, components, models)
