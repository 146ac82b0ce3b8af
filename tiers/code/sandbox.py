"""The `code.sandbox` tier: a candidate's Python code run against its tests in a Docker sandbox."""

from __future__ import annotations

import ast
import io
import threading
import tokenize
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, Literal

from pydantic import ValidationError

from tiers.base import Candidate, Cost, Verdict, VerdictStatus, judge_one, stable_json
from tiers.code.attach import SandboxInfraError
from tiers.code.engine import SandboxUnavailableError, startup_check
from tiers.code.pool import get_pool, shutdown_pool
from tiers.code.schemas import SOURCE_LIMIT_ERROR, CodePayload, SandboxConfig
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

SUPPORTED_LANGUAGES = frozenset({"python", "python3"})
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
        if payload.cases:  # only then: the canonical form of other payloads stays as it was
            canonical["io"] = io_spec(payload)
        return stable_json(canonical)

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        """Judge every item concurrently through the pool; one verdict per item, in order."""
        try:
            cfg = SandboxConfig.model_validate(dict(config))
        except ValidationError as exc:
            return [self._verdict(VerdictStatus.error, "invalid_config", str(exc)) for _ in items]
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

    def _judge(self, item: Candidate, cfg: SandboxConfig) -> tuple[Verdict, float]:
        settings = self.settings
        if item.kind != "code":
            return self._verdict(
                VerdictStatus.error, "wrong_kind", f"code.sandbox judges code, not {item.kind}"
            ), 0.0
        language = item.payload.get("language", "python")
        if not isinstance(language, str) or language.lower() not in SUPPORTED_LANGUAGES:
            return self._verdict(
                VerdictStatus.failed,
                "unsupported_language",
                f"language {language!r} is not supported; supported: python",
            ), 0.0
        try:
            payload = CodePayload.model_validate(
                item.payload, context={"sandbox_settings": settings}
            )
        except ValidationError as exc:
            too_large = [e["msg"] for e in exc.errors() if e["type"] == SOURCE_LIMIT_ERROR]
            if too_large:
                return self._verdict(VerdictStatus.error, SOURCE_LIMIT_ERROR, too_large[0]), 0.0
            return self._verdict(VerdictStatus.error, "invalid_payload", str(exc)), 0.0
        try:
            style, expected = (
                ("io", len(payload.cases)) if payload.cases else detect_test_style(payload.tests)
            )
            if payload.checker == "special":
                compile(payload.checker_code or "", "checker.py", "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            return self._verdict(
                VerdictStatus.error, "invalid_tests", f"the tests do not parse: {exc}"
            ), 0.0
        limits = Limits(
            timeout_s=min(
                payload.timeout_s or cfg.timeout_s or settings.default_timeout_s,
                settings.max_timeout_s,
            ),
            memory_mb=min(
                payload.memory_mb or cfg.memory_mb or settings.default_memory_mb,
                settings.max_memory_mb,
            ),
        )
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
        try:
            outcome = get_pool(settings).run(spec, limits.timeout_s, limits.memory_mb)
        except SandboxUnavailableError as exc:
            reason = "image_missing" if "image" in str(exc) else "engine_unavailable"
            return self._verdict(VerdictStatus.error, reason, str(exc)), 0.0
        except SandboxInfraError as exc:
            return self._verdict(VerdictStatus.error, exc.reason, str(exc)), 0.0
        cpu_s = float((outcome.report or {}).get("cpu_s") or 0.0)
        return verdict_from_outcome(outcome, payload, cfg, settings, limits, expected), cpu_s
