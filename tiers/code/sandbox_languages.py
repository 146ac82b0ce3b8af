"""Languages other than Python in the code sandbox: their images, warm pools and judging.

Python keeps the tier's own pool (tiers.code.pool.get_pool, image sandbox.image); every other
image family gets a pool of its own per process, sized by sandbox.language_pool_size(s), made
of containers of the family's image (tiers.code.languages.family_tag). A candidate is judged
by running its program against stdin/stdout cases, or, without cases, by compiling its code
with the payload's tests appended (an assert-style main) and running that once: it passes when
it exits with 0 within the limits.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from typing import Any

from tiers.base import Verdict, VerdictStatus
from tiers.code.attach import RunOutcome, SandboxInfraError
from tiers.code.engine import SandboxUnavailableError, make_client
from tiers.code.image import DEFAULT_SUITE, image_exists
from tiers.code.languages import BASE_FAMILY, Language, family_tag
from tiers.code.pool import SandboxPool, get_pool, shutdown_pool
from tiers.code.schemas import CodePayload, SandboxConfig
from tiers.code.settings import SandboxSettings
from tiers.code.verdicts import Limits, code_verdict, verdict_from_outcome

logger = logging.getLogger(__name__)

# The judge's checker of an assert-style main: the program passes when it exits with 0.
EXIT_ZERO_CHECKER = "def check(stdin, output, expected):\n    return True\n"

# What the judge allows past a program's compile and run limits before it stops the candidate's
# process itself: that process keeps the limits of each step (run_program).
JUDGE_SLACK_S = 1.0

_pools: dict[str, SandboxPool] = {}
_pools_lock = threading.Lock()
_built: dict[str, tuple[float, bool]] = {}  # image -> (checked at, exists)


class LanguageNotBuiltError(RuntimeError):
    """The image of a language's family is not built on the sandbox's Docker engine."""

    def __init__(self, language: Language, image: str) -> None:
        super().__init__(
            f"language {language.name!r} needs the sandbox image {image}, which is not built; "
            f"build it with `verifier-service sandbox build-image --language {language.name}` "
            "(or `--all`)"
        )
        self.language = language
        self.image = image


def image_for_family(family: str) -> str:
    """The image tag of a family other than the base one (its inputs hashed into the tag)."""
    return family_tag(family, DEFAULT_SUITE)


def image_for(language: Language, settings: SandboxSettings) -> str:
    """The image a language runs in: sandbox.image for Python and Bash, else its family's."""
    return settings.image if language.family == BASE_FAMILY else image_for_family(language.family)


def language_built(language: Language, settings: SandboxSettings) -> bool | None:
    """Whether the language's image exists on the engine; None when the engine cannot be asked
    (an API process without the Docker socket: the worker then says so in its verdict)."""
    if language.family == BASE_FAMILY:
        return True
    image = image_for(language, settings)
    now = time.monotonic()
    cached = _built.get(image)
    if cached is not None and now - cached[0] < settings.language_image_check_s:
        return cached[1]
    try:
        client = make_client(settings)
        try:
            exists = image_exists(client, image)
        finally:
            client.close()
    except Exception:  # no engine here: not this process's question to answer
        logger.debug("cannot ask the Docker engine whether %s exists", image, exc_info=True)
        return None
    _built[image] = (now, exists)
    return exists


def pool_settings(language: Language, settings: SandboxSettings) -> SandboxSettings:
    """The settings of a family's pool: its image and its configured size."""
    size = settings.language_pool_sizes.get(language.family, settings.language_pool_size)
    return settings.model_copy(update={"image": image_for(language, settings), "pool_size": size})


def language_pool(language: Language, settings: SandboxSettings) -> SandboxPool:
    """This process's pool for the language's family (created on first use).

    Raises LanguageNotBuiltError when the family's image is missing.
    """
    if language.family == BASE_FAMILY:
        return get_pool(settings)
    wanted = pool_settings(language, settings)
    with _pools_lock:
        pool = _pools.get(language.family)
        if pool is not None and (pool.pid != os.getpid() or pool.settings != wanted):
            if pool.pid == os.getpid():
                pool.shutdown()
            pool = None
        if pool is None:
            try:
                pool = SandboxPool(wanted)
            except SandboxUnavailableError as exc:
                if "missing" in str(exc):
                    _built[wanted.image] = (time.monotonic(), False)
                    raise LanguageNotBuiltError(language, wanted.image) from exc
                raise
            _pools[language.family] = pool
        return pool


def shutdown_language_pools() -> None:
    """Remove every container of this process's language pools (registered to run at exit)."""
    with _pools_lock:
        pools = [p for p in _pools.values() if p.pid == os.getpid()]
        _pools.clear()
    for pool in pools:
        pool.shutdown()


atexit.register(shutdown_language_pools)


def shutdown_all_pools() -> None:
    """Remove every warm container of this process, Python's pool and the languages' (for a
    process that ends by a signal, where atexit handlers do not run: the API's lifespan)."""
    shutdown_pool()
    shutdown_language_pools()


def compile_timeout(language: Language, asked: float | None, settings: SandboxSettings) -> float:
    """The compile time limit: the request's, else the language's, at most the setting's."""
    return min(asked or language.compile_timeout_s, settings.compile_max_timeout_s)


def container_memory_mb(language: Language, run_memory_mb: int) -> int:
    """The container's memory limit: enough for the compiler, at least the run's limit."""
    return max(run_memory_mb, language.compile_memory_mb if language.compiled else 0)


def run_program(
    language: Language,
    settings: SandboxSettings,
    spec: dict[str, Any],
    *,
    run_timeout_s: float,
    compile_timeout_s: float,
    memory_mb: int,
) -> RunOutcome:
    """Run one spec (mode run or io) for `language` in its family's pool.

    Each limit is measured from the step it limits, by the candidate's process: the compile's
    from the compiler's start, the run's from the program's. In mode run (`/run_code`) the
    judge's deadline for the whole is only a backstop, JUDGE_SLACK_S past the sum, so that what
    the candidate's process does before and between the steps (writing the files, starting the
    compiler, reporting its result) never turns a compile past its limit into a run timeout
    with no compile result.
    """
    compile_s = compile_timeout_s if language.compiled else 0.0
    # mode io (the tier's cases) keeps its total as the judge's limit: its cases have their own.
    slack = JUDGE_SLACK_S if spec.get("mode") == "run" else 0.0
    spec = dict(
        spec,
        lang=language.harness_spec(compile_timeout_s, memory_mb),
        run_timeout_s=run_timeout_s,
        timeout_s=run_timeout_s + compile_s + slack,
    )
    pool = language_pool(language, settings)
    return pool.run(spec, spec["timeout_s"], container_memory_mb(language, memory_mb))


def judge_language(
    payload: CodePayload, cfg: SandboxConfig, settings: SandboxSettings, language: Language
) -> tuple[Verdict, float]:
    """The verdict on a candidate in another language than Python, and its container CPU."""
    limits = Limits.of(payload, cfg, settings)
    code = payload.code
    if payload.cases:
        io: dict[str, Any] = {
            "cases": [case.model_dump() for case in payload.cases],
            "checker": payload.checker,
            "checker_code": payload.checker_code,
            "abs_tol": payload.abs_tol,
            "rel_tol": payload.rel_tol,
            "case_timeout_s": payload.case_timeout_s,
        }
    else:  # an assert-style main appended to the code: one test, passed by exiting with 0
        code = f"{payload.code}\n{payload.tests}\n"
        io = {
            "cases": [{"stdin": "", "stdout": ""}],
            "names": ["main"],
            "checker": "special",
            "checker_code": EXIT_ZERO_CHECKER,
            "case_timeout_s": limits.timeout_s,
        }
    spec = {
        "mode": "io",
        "code": code,
        "tests": "",
        "setup": payload.setup,
        "io": io,
        "output_cap": settings.output_cap_bytes,
        "output_limit": settings.output_limit_bytes,
    }
    try:
        outcome = run_program(
            language,
            settings,
            spec,
            run_timeout_s=limits.timeout_s,
            compile_timeout_s=compile_timeout(language, payload.compile_timeout_s, settings),
            memory_mb=limits.memory_mb,
        )
    except LanguageNotBuiltError as exc:
        return code_verdict(VerdictStatus.error, "image_missing", str(exc)), 0.0
    except SandboxUnavailableError as exc:
        reason = "image_missing" if "image" in str(exc) else "engine_unavailable"
        return code_verdict(VerdictStatus.error, reason, str(exc)), 0.0
    except SandboxInfraError as exc:
        return code_verdict(VerdictStatus.error, exc.reason, str(exc)), 0.0
    cpu_s = float((outcome.report or {}).get("cpu_s") or 0.0)
    expected = len(io["cases"])
    return verdict_from_outcome(outcome, payload, cfg, settings, limits, expected), cpu_s
