"""What every judge tier does with a batch: one event loop for its calls (in a thread of its own
when the caller already runs one), one HTTP client per endpoint, the wait for an endpoint that
is down bounded by the items' deadline, and the batch's CPU shared among its verdicts."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any, TypeVar

import httpx

from tiers.base import Candidate, Cost, Verdict, VerdictStatus, batch_deadline, stable_json
from tiers.judge import monitor
from tiers.judge.client import EndpointCaller
from tiers.judge.recorded import note
from tiers.judge.settings import JudgeSettings

T = TypeVar("T")


def candidate_text(item: Candidate) -> str:
    """The text a judge reads: a text item's text, else the payload as JSON."""
    if item.kind == "text":
        return str(item.payload.get("text", ""))
    return stable_json(item.payload)


def run_sync(coroutine: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a batch's coroutine to the end from synchronous code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a worker's thread, as usual: its own loop for this batch
        return asyncio.run(coroutine())
    with ThreadPoolExecutor(1) as pool:  # inside an event loop: a thread of its own
        return pool.submit(lambda: asyncio.run(coroutine())).result()


def wait_until(settings: JudgeSettings) -> float | None:
    """time.monotonic() until which calls keep trying an endpoint that is down: the items'
    deadline less the margin, at most max_wait_s from now; None where no deadline is known."""
    deadline = batch_deadline.get()
    if deadline is None or settings.max_wait_s <= 0:
        return None
    left = min(settings.max_wait_s, deadline - time.time() - settings.deadline_margin_s)
    return time.monotonic() + max(0.0, left)


def share_cpu(verdicts: list[Verdict], cpu0: float) -> list[Verdict]:
    """Each verdict's CPU: the batch's process CPU since `cpu0`, shared evenly."""
    share = (time.process_time() - cpu0) / max(len(verdicts), 1)
    for verdict in verdicts:
        verdict.cost = Cost(cpu_s=share, wall_s=verdict.cost.wall_s)
    return verdicts


def error_verdict(
    tier: str,
    version: str,
    reason: str,
    message: str,
    components: dict[str, float] | None = None,
    models: Iterable[str | None] = (),
) -> Verdict:
    """An error verdict; its feedback ends with the judge_model line (the bare marker when no
    model answered), so nothing the message quotes can pose as the tier's own last line."""
    return Verdict(
        status=VerdictStatus.error,
        reason=reason,
        feedback=note(message, models),
        components=components or {},
        tier=tier,
        tier_version=version,
    )


def watch(text: str) -> tuple[dict[str, float], str]:
    """The grader_addressed monitor's components and feedback for a text."""
    flags = monitor.scan(text)
    return monitor.components(flags), monitor.feedback(flags)


@cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for the process: building one (loading the CA bundle) takes ~50 ms,
    which a new HTTP client per batch would otherwise pay every batch."""
    return httpx.create_ssl_context()


async def with_caller(
    settings: JudgeSettings,
    endpoint_name: str,
    work: Callable[[EndpointCaller], Awaitable[list[Verdict]]],
    not_configured: Callable[[str], list[Verdict]],
) -> list[Verdict]:
    """`work` with a caller of the named endpoint; `not_configured(message)` without one."""
    endpoint = settings.endpoints.get(endpoint_name)
    if endpoint is None:
        known = ", ".join(sorted(settings.endpoints)) or "none"
        return not_configured(
            f"judge endpoint {endpoint_name!r} is not configured in this worker (configured: "
            f"{known})"
        )
    limits = httpx.Limits(max_connections=endpoint.max_in_flight)
    async with httpx.AsyncClient(limits=limits, verify=tls_context()) as client:
        caller = EndpointCaller(endpoint_name, endpoint, settings, client, wait_until(settings))
        return await work(caller)


async def timed(name: str, version: str, judge: Awaitable[Verdict]) -> Verdict:
    """One item's verdict with its wall time; a bug is an error verdict, not a lost batch."""
    started = time.perf_counter()
    try:
        verdict = await judge
    except Exception as exc:
        verdict = error_verdict(
            name,
            version,
            "internal_error",
            f"{name} failed on this item: {type(exc).__name__}: {exc}",
        )
    verdict.cost = Cost(wall_s=time.perf_counter() - started)
    return verdict


def endpoint_models(settings: JudgeSettings) -> dict[str, str]:
    """Each endpoint's model, for cache keys: a new model is a new judge."""
    return {name: e.model for name, e in sorted(settings.endpoints.items())}


def gather_all(coroutines: Sequence[Awaitable[Verdict]]) -> Awaitable[list[Verdict]]:
    async def _all() -> list[Verdict]:
        return list(await asyncio.gather(*coroutines))

    return _all()
