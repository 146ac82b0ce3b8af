"""The `code.sandbox` tier: a candidate's Python code run against its tests in a Docker sandbox."""

from __future__ import annotations

import ast
import io
import threading
import tokenize
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import ValidationError

from tiers.base import Candidate, Cost, Verdict, VerdictStatus, judge_one, stable_json
from tiers.code.attach import RunOutcome, SandboxInfraError
from tiers.code.engine import SandboxUnavailableError, startup_check
from tiers.code.languages import UnknownLanguageError, get_language
from tiers.code.pool import get_pool, shutdown_pool
from tiers.code.sandbox_languages import judge_language
from tiers.code.schemas import (
    LANGUAGE_NOT_BUILT_ERROR,
    SOURCE_LIMIT_ERROR,
    CodePayload,
    SandboxConfig,
)
from tiers.code.session import JobContainer
from tiers.code.settings import SandboxSettings
from tiers.code.verdicts import (
    TIER_NAME,
    TIER_VERSION,
    Limits,
    code_verdict,
    verdict_from_outcome,
)

__all__ = [
    "CodePayload",
    "SandboxConfig",
    "SandboxTier",
    "SandboxUnavailableError",
    "shutdown_pool",
    "startup_check",
]

TestStyle = Literal["pytest", "script", "io"]
# CPython 3.11 can fail ast.parse in concurrent threads ("AST constructor recursion depth
# mismatch", seen on HumanEval/157 in a batch of 4 threads): one parse at a time.
_PARSE_LOCK = threading.Lock()


def detect_test_style(tests: str) -> tuple[TestStyle, int]:
    """pytest if the tests define test_* functions or Test* classes, else script; and how many.

    Raises SyntaxError when the tests do not parse.
    """
    with _PARSE_LOCK:
        tree = ast.parse(tests, "tests.py")
    count = 0
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            count += 1
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            count += sum(
                isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test")
                for n in node.body
            )
    if count:
        return "pytest", count
    return "script", sum(isinstance(n, ast.Assert) for n in tree.body) or 1


def io_spec(payload: CodePayload) -> dict[str, Any]:
    """The stdin/stdout cases and their checker, as the judge's io runner takes them."""
    return {
        "cases": [case.model_dump() for case in payload.cases or []],
        "checker": payload.checker,
        "checker_code": payload.checker_code,
        "abs_tol": payload.abs_tol,
        "rel_tol": payload.rel_tol,
        "case_timeout_s": payload.case_timeout_s,
    }


def normalize_source(text: str) -> str:
    """Source with unified line ends, no trailing whitespace and no leading/trailing blank lines.

    Trailing whitespace inside multi-line string literals is kept: it can change behaviour.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    keep: set[int] = set()  # 1-based numbers of lines that end inside a string literal
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                keep.update(range(tok.start[0], tok.end[0]))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        keep = set(range(1, len(lines) + 1))
    out = [line if i in keep else line.rstrip() for i, line in enumerate(lines, start=1)]
    return "\n".join(out).strip("\n")


class SandboxTier:
    """Runs `code` candidates against their tests in single-use, locked-down containers."""

    name: ClassVar[str] = TIER_NAME
    version: ClassVar[str] = TIER_VERSION
    queue: ClassVar[str] = "tier.sandbox"
    cost_class: ClassVar[float] = 1.0
    kinds: ClassVar[frozenset[str]] = frozenset({"code"})
    settings_model: ClassVar[type[SandboxSettings]] = SandboxSettings

    def __init__(self, settings: SandboxSettings | None = None) -> None:
        self.settings = settings or SandboxSettings()

    def validate_config(self, config: Mapping[str, Any]) -> None:
        """Raise ValueError saying what is wrong with a policy's config for this tier."""
        try:
            SandboxConfig.model_validate(dict(config))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(config)'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ValueError(f"invalid code.sandbox config: {problems}") from None

    def canonical_payload(self, item: Candidate) -> str:
        try:
            payload = CodePayload.model_validate(
                item.payload, context={"sandbox_settings": self.settings}
            )
        except ValidationError:
            return stable_json(item.payload)
        canonical: dict[str, Any] = {
            "language": payload.language.lower(),
            "code": normalize_source(payload.code),
            "tests": normalize_source(payload.tests),
            "setup": normalize_source(payload.setup) if payload.setup else None,
            "fail_to_pass": sorted(payload.fail_to_pass)
            if payload.fail_to_pass is not None
            else None,
            "pass_to_pass": sorted(payload.pass_to_pass)
            if payload.pass_to_pass is not None
            else None,
            "timeout_s": payload.timeout_s,
            "memory_mb": payload.memory_mb,
        }
        if payload.compile_timeout_s is not None:
            canonical["compile_timeout_s"] = payload.compile_timeout_s
        if payload.cases:  # only then: the canonical form of other payloads stays as it was
            canonical["io"] = io_spec(payload)
        return stable_json(canonical)

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        """Judge every item concurrently through the pool; one verdict per item, in order."""
        try:
            cfg = SandboxConfig.model_validate(dict(config))
        except ValidationError as exc:
            return [self._verdict(VerdictStatus.error, "invalid_config", str(exc)) for _ in items]
        if (cfg.isolation or self.settings.isolation) != "process":
            return self._verify_each(items, cfg)
        # Process isolation serves Python candidates; other languages run in their own images,
        # one container per candidate, side by side with the job's containers.
        others = [i for i, item in enumerate(items) if not _is_python(item)]
        if not others:
            return self._verify_job(items, cfg)
        python = [i for i in range(len(items)) if i not in set(others)]
        verdicts: list[Verdict | None] = [None] * len(items)
        for indices, judged in (
            (others, self._verify_each([items[i] for i in others], cfg)),
            (python, self._verify_job([items[i] for i in python], cfg)),
        ):
            for index, verdict in zip(indices, judged, strict=True):
                verdicts[index] = verdict
        return [v for v in verdicts if v is not None]

    def _verify_each(self, items: Sequence[Candidate], cfg: SandboxConfig) -> list[Verdict]:
        """isolation "container": every item in a container of its own, concurrently."""
        workers = max(1, min(self.settings.concurrency, len(items)))
        if workers == 1:
            return [self.verify_one(item, cfg) for item in items]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox") as executor:
            return list(executor.map(lambda item: self.verify_one(item, cfg), items))

    def verify_one(self, item: Candidate, cfg: SandboxConfig) -> Verdict:
        """Judge one item; every problem becomes a verdict with a reason."""

        def judge() -> Verdict:
            verdict, container_cpu_s = self._judge(item, cfg)
            verdict.cost = Cost(cpu_s=container_cpu_s)  # judge_one adds this process's time
            return verdict

        return judge_one(self.name, self.version, judge)

    # -- internals ---------------------------------------------------------------------------

    def _verdict(
        self,
        status: VerdictStatus,
        reason: str | None,
        feedback: str = "",
    ) -> Verdict:
        return code_verdict(status, reason, feedback)

    def _prepare(self, item: Candidate, cfg: SandboxConfig) -> Verdict | Prepared:
        """The judge's spec of one item, or the verdict on an item that needs no run."""
        settings = self.settings
        if item.kind != "code":
            return self._verdict(
                VerdictStatus.error, "wrong_kind", f"code.sandbox judges code, not {item.kind}"
            )
        language = item.payload.get("language", "python")
        try:  # other languages than Python: tiers.code.sandbox_languages
            lang = get_language(language if isinstance(language, str) else "")
        except UnknownLanguageError as exc:
            return self._verdict(VerdictStatus.failed, "unsupported_language", str(exc))
        try:
            payload = CodePayload.model_validate(
                item.payload, context={"sandbox_settings": settings}
            )
        except ValidationError as exc:
            too_large = [e["msg"] for e in exc.errors() if e["type"] == SOURCE_LIMIT_ERROR]
            if too_large:
                return self._verdict(VerdictStatus.error, SOURCE_LIMIT_ERROR, too_large[0])
            unbuilt = [e["msg"] for e in exc.errors() if e["type"] == LANGUAGE_NOT_BUILT_ERROR]
            if unbuilt:
                return self._verdict(VerdictStatus.error, "image_missing", unbuilt[0])
            return self._verdict(VerdictStatus.error, "invalid_payload", str(exc))
        if lang.name != "python":  # one container per candidate, in its language's image
            verdict, container_cpu_s = judge_language(payload, cfg, settings, lang)
            verdict.cost = Cost(cpu_s=container_cpu_s)
            return verdict
        try:
            style, expected = (
                ("io", len(payload.cases)) if payload.cases else detect_test_style(payload.tests)
            )
            if payload.checker == "special":
                compile(payload.checker_code or "", "checker.py", "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            return self._verdict(
                VerdictStatus.error, "invalid_tests", f"the tests do not parse: {exc}"
            )
        limits = Limits.of(payload, cfg, settings)
        spec = {
            "mode": style,
            "code": payload.code,
            "tests": payload.tests,
            "setup": payload.setup,
            "io": io_spec(payload) if payload.cases else None,
            "timeout_s": limits.timeout_s,
            "output_cap": settings.output_cap_bytes,
            "output_limit": settings.output_limit_bytes,
        }
        return Prepared(spec, payload, limits, expected)

    def _conclude(
        self, prepared: Prepared, cfg: SandboxConfig, run: Callable[[], RunOutcome]
    ) -> tuple[Verdict, float]:
        """Run a prepared item (`run`) and make its verdict; with the container's CPU time."""
        try:
            outcome = run()
        except SandboxUnavailableError as exc:
            reason = "image_missing" if "image" in str(exc) else "engine_unavailable"
            return self._verdict(VerdictStatus.error, reason, str(exc)), 0.0
        except SandboxInfraError as exc:
            return self._verdict(VerdictStatus.error, exc.reason, str(exc)), 0.0
        cpu_s = float((outcome.report or {}).get("cpu_s") or 0.0)
        p = prepared
        verdict = verdict_from_outcome(outcome, p.payload, cfg, self.settings, p.limits, p.expected)
        return verdict, cpu_s

    def _judge(self, item: Candidate, cfg: SandboxConfig) -> tuple[Verdict, float]:
        prepared = self._prepare(item, cfg)
        if isinstance(prepared, Verdict):  # no run, or another language's (its CPU in cost)
            return prepared, prepared.cost.cpu_s
        limits = prepared.limits

        def run() -> RunOutcome:
            pool = get_pool(self.settings)
            return pool.run(prepared.spec, limits.timeout_s, limits.memory_mb)

        return self._conclude(prepared, cfg, run)

    def _verify_job(self, items: Sequence[Candidate], cfg: SandboxConfig) -> list[Verdict]:
        """isolation "process": the batch is one job (one request's items, one principal). Its
        candidates run one after another, each in a fresh process, in containers that serve
        this job only: up to `job_containers` per memory limit, side by side."""
        verdicts: list[Verdict | None] = [None] * len(items)
        groups: dict[int, list[tuple[int, Prepared]]] = {}  # memory limit -> its items
        for index, item in enumerate(items):
            try:
                prepared = self._prepare(item, cfg)
            except Exception as exc:  # a bug never loses the rest of the batch
                prepared = self._verdict(
                    VerdictStatus.error, "internal_error", f"{type(exc).__name__}: {exc}"
                )
            if isinstance(prepared, Verdict):
                verdicts[index] = judge_one(self.name, self.version, _returning(prepared))
            else:
                groups.setdefault(prepared.limits.memory_mb, []).append((index, prepared))
        lanes: list[tuple[int, list[tuple[int, Prepared]]]] = []
        for memory_mb, group in groups.items():
            k = min(self.settings.job_containers, len(group))
            lanes += [(memory_mb, group[i::k]) for i in range(k)]

        def serve(lane: tuple[int, list[tuple[int, Prepared]]]) -> None:
            memory_mb, queue = lane
            session: JobContainer | None = None

            def run(spec: dict[str, Any], timeout_s: float) -> RunOutcome:
                nonlocal session
                if session is None:
                    session = JobContainer(get_pool(self.settings), memory_mb)
                return session.run(spec, timeout_s)

            try:
                for index, prepared in queue:
                    verdicts[index] = self._measured(prepared, cfg, run)
            finally:
                if session is not None:
                    session.close()

        if len(lanes) == 1:
            serve(lanes[0])
        elif lanes:
            with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="job") as executor:
                list(executor.map(serve, lanes))
        return [v for v in verdicts if v is not None]

    def _measured(
        self,
        prepared: Prepared,
        cfg: SandboxConfig,
        run: Callable[[dict[str, Any], float], RunOutcome],
    ) -> Verdict:
        def judge() -> Verdict:
            verdict, container_cpu_s = self._conclude(
                prepared, cfg, lambda: run(prepared.spec, prepared.limits.timeout_s)
            )
            verdict.cost = Cost(cpu_s=container_cpu_s)
            return verdict

        return judge_one(self.name, self.version, judge)


def _returning(verdict: Verdict) -> Callable[[], Verdict]:
    return lambda: verdict


@dataclass
class Prepared:
    """One item ready for the judge: its spec, its payload, its limits, its test count."""

    spec: dict[str, Any]
    payload: CodePayload
    limits: Limits
    expected: int


def _is_python(item: Candidate) -> bool:
    """Whether an item names Python (or a language nobody knows: it fails like Python's would)."""
    language = item.payload.get("language", "python")
    try:
        return get_language(language if isinstance(language, str) else "").name == "python"
    except UnknownLanguageError:
        return True
