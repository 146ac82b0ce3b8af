"""The `code.sandbox` tier: a candidate's Python code run against its tests in a Docker sandbox."""

from __future__ import annotations

import ast
import errno
import io
import tokenize
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tiers.base import Candidate, Cost, Verdict, VerdictStatus, judge_one, stable_json
from tiers.code.pool import (
    RunOutcome,
    SandboxInfraError,
    SandboxUnavailableError,
    get_pool,
    shutdown_pool,
    startup_check,
)
from verifier_service.settings import SandboxSettings, get_settings

__all__ = [
    "CodePayload",
    "SandboxConfig",
    "SandboxTier",
    "SandboxUnavailableError",
    "shutdown_pool",
    "startup_check",
]

SUPPORTED_LANGUAGES = frozenset({"python", "python3"})
MAX_TEST_COMPONENTS = 256
TestStyle = Literal["pytest", "script"]

# Why a run was stopped: these are failures of the candidate whatever its tests said.
LIMIT_MESSAGES = {
    "pids_limit": "the candidate hit the process limit ({pids} processes); fork bombs are killed",
    "memory_limit": "the candidate ran out of memory (limit {memory_mb} MB) and was killed",
    "timeout": "the tests did not finish within {timeout_s:g} s; every process was killed",
    "output_limit": "the candidate wrote more than {output_limit} bytes of output and was killed",
    "harness_killed": "the candidate killed the test harness before it could report",
    "crashed": "the test process died from signal {signal}",
    "stray_process": "processes were still running after the tests ended ({strays}); "
    "they were killed",
}


class SandboxConfig(BaseModel):
    """Policy config of the code.sandbox tier."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float | None = Field(
        default=None, gt=0, description="Wall-clock limit per candidate; default: the setting."
    )
    memory_mb: int | None = Field(
        default=None, ge=64, description="Memory limit per candidate; default: the setting."
    )
    scoring: Literal["fraction", "all_or_nothing"] = Field(
        default="fraction",
        description="fraction: share of tests passed; all_or_nothing: 1 only if all pass.",
    )


class CodePayload(BaseModel):
    """The payload of a `code` candidate."""

    model_config = ConfigDict(extra="forbid")

    language: str = Field(default="python", description="Only python is supported.")
    code: str = Field(description="The candidate's source, written to solution.py.")
    tests: str = Field(
        min_length=1,
        description="pytest tests (test_* functions) or an assert-style script run after the "
        "code in the same namespace; pytest tests see the solution's names or import them "
        "from `solution`.",
    )
    setup: str | None = Field(
        default=None, description="Python run in the work dir before the code is written."
    )
    fail_to_pass: list[str] | None = Field(
        default=None, description="Tests that must pass now (SWE-bench style rule)."
    )
    pass_to_pass: list[str] | None = Field(
        default=None, description="Tests that passed before and must still pass."
    )
    timeout_s: float | None = Field(default=None, gt=0, description="Overrides the config.")
    memory_mb: int | None = Field(default=None, ge=64, description="Overrides the config.")


def detect_test_style(tests: str) -> tuple[TestStyle, int]:
    """pytest if the tests define test_* functions or Test* classes, else script; and how many.

    Raises SyntaxError when the tests do not parse.
    """
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


@dataclass
class _Tests:
    """Per-test outcomes gathered from the harness's events."""

    names: list[str] = field(default_factory=list)
    outcome: dict[str, str] = field(default_factory=dict)
    exc: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    first_traceback: str = ""
    solution_error: dict[str, Any] | None = None
    collect_errors: list[str] = field(default_factory=list)
    finished: bool = False

    @classmethod
    def from_events(cls, events: Sequence[Mapping[str, Any]]) -> _Tests:
        tests = cls()
        collected = False
        for event in events:
            kind = event.get("event")
            name = str(event.get("name", ""))
            if kind == "collected" and not collected:
                collected = True
                tests.names = [str(n) for n in event.get("tests") or []]
            elif kind == "result" and name:
                if name not in tests.names:
                    tests.names.append(name)
                outcome = str(event.get("outcome"))
                previous = tests.outcome.get(name)
                if previous != "failed" and not (previous == "skipped" and outcome == "passed"):
                    tests.outcome[name] = outcome
                if outcome == "failed":
                    if event.get("exc"):
                        tests.exc.setdefault(name, (str(event["exc"]), event.get("errno")))
                    if not tests.first_traceback:
                        tests.first_traceback = str(
                            event.get("traceback") or event.get("message") or ""
                        )
            elif kind == "exc" and name:
                tests.exc.setdefault(name, (str(event.get("exc")), event.get("errno")))
            elif kind == "solution_error" and tests.solution_error is None:
                tests.solution_error = dict(event)
            elif kind == "collect_error":
                tests.collect_errors.append(str(event.get("traceback", "")))
            elif kind == "finished":
                tests.finished = True
        return tests

    def passed(self, name: str) -> bool:
        return self.outcome.get(name) == "passed"


def _denial_reason(exc_name: str, err: int | None) -> str | None:
    """A sandbox limit recognised from the exception that failed a test."""
    if exc_name == "MemoryError" or err == errno.ENOMEM:
        return "memory_limit"
    if err == errno.ENOSPC:
        return "disk_limit"
    if err == errno.EROFS:
        return "read_only_filesystem"
    if exc_name == "gaierror" or err in (
        errno.ENETUNREACH,
        errno.EHOSTUNREACH,
        errno.ECONNREFUSED,
        errno.EADDRNOTAVAIL,
    ):
        return "network_disabled"
    if exc_name == "BlockingIOError" and err == errno.EAGAIN:
        return "pids_limit"
    if err in (errno.EACCES, errno.EPERM):
        return "permission_denied"
    return None


def _match_test(wanted: str, names: Sequence[str]) -> str | None:
    """The collected test a F2P/P2P entry means: exact, or a pytest node id of it."""
    if wanted in names:
        return wanted
    if "::" in wanted:
        head, _, rest = wanted.partition("::")
        if head.endswith(".py") and rest in names:
            return rest
    return None


@dataclass
class _Limits:
    timeout_s: float
    memory_mb: int


class SandboxTier:
    """Runs `code` candidates against their tests in single-use, locked-down containers."""

    name: ClassVar[str] = "code.sandbox"
    version: ClassVar[str] = "1"
    queue: ClassVar[str] = "tier.sandbox"
    cost_class: ClassVar[float] = 1.0
    kinds: ClassVar[frozenset[str]] = frozenset({"code"})

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
            payload = CodePayload.model_validate(item.payload)
        except ValidationError:
            return stable_json(item.payload)
        return stable_json(
            {
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
        )

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        """Judge every item concurrently through the pool; one verdict per item, in order."""
        try:
            cfg = SandboxConfig.model_validate(dict(config))
        except ValidationError as exc:
            return [self._verdict(VerdictStatus.error, "invalid_config", str(exc)) for _ in items]
        settings = get_settings().sandbox
        workers = max(1, min(settings.concurrency, len(items)))
        if workers == 1:
            return [self.verify_one(item, cfg, settings) for item in items]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox") as executor:
            return list(executor.map(lambda item: self.verify_one(item, cfg, settings), items))

    def verify_one(self, item: Candidate, cfg: SandboxConfig, settings: SandboxSettings) -> Verdict:
        """Judge one item; every problem becomes a verdict with a reason."""

        def judge() -> Verdict:
            verdict, container_cpu_s = self._judge(item, cfg, settings)
            verdict.cost = Cost(cpu_s=container_cpu_s)  # judge_one adds this process's time
            return verdict

        return judge_one(self.name, self.version, judge)

    # -- internals ---------------------------------------------------------------------------

    def _verdict(
        self,
        status: VerdictStatus,
        reason: str | None,
        feedback: str = "",
        score: float | None = None,
        components: dict[str, float] | None = None,
    ) -> Verdict:
        if score is None and status is not VerdictStatus.error:
            score = 0.0
        return Verdict(
            status=status,
            score=score,
            components=components or {},
            feedback=feedback,
            reason=reason,
            tier=self.name,
            tier_version=self.version,
        )

    def _judge(
        self, item: Candidate, cfg: SandboxConfig, settings: SandboxSettings
    ) -> tuple[Verdict, float]:
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
            payload = CodePayload.model_validate(item.payload)
        except ValidationError as exc:
            return self._verdict(VerdictStatus.error, "invalid_payload", str(exc)), 0.0
        size = sum(len(s.encode()) for s in (payload.code, payload.tests, payload.setup or ""))
        if size > settings.max_source_bytes:
            return self._verdict(
                VerdictStatus.error,
                "payload_too_large",
                f"code + tests + setup are {size} bytes; the limit is "
                f"{settings.max_source_bytes} (sandbox.max_source_bytes)",
            ), 0.0
        try:
            style, expected = detect_test_style(payload.tests)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            return self._verdict(
                VerdictStatus.error, "invalid_tests", f"the tests do not parse: {exc}"
            ), 0.0
        limits = _Limits(
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
            "timeout_s": limits.timeout_s,
            "output_cap": settings.output_cap_bytes,
            "output_limit": settings.output_limit_bytes,
        }
        try:
            outcome = get_pool().run(spec, limits.timeout_s, limits.memory_mb)
        except SandboxUnavailableError as exc:
            reason = "image_missing" if "image" in str(exc) else "engine_unavailable"
            return self._verdict(VerdictStatus.error, reason, str(exc)), 0.0
        except SandboxInfraError as exc:
            return self._verdict(VerdictStatus.error, exc.reason, str(exc)), 0.0
        cpu_s = float((outcome.report or {}).get("cpu_s") or 0.0)
        return self._from_outcome(outcome, payload, cfg, settings, limits, expected), cpu_s

    def _from_outcome(
        self,
        outcome: RunOutcome,
        payload: CodePayload,
        cfg: SandboxConfig,
        settings: SandboxSettings,
        limits: _Limits,
        expected: int,
    ) -> Verdict:
        fmt: dict[str, Any] = {
            "pids": settings.pids_limit,
            "memory_mb": limits.memory_mb,
            "timeout_s": limits.timeout_s,
            "output_limit": settings.output_limit_bytes,
        }
        report = outcome.report
        if report is None and outcome.exit_code == 1 and "Traceback" in outcome.raw_stderr:
            # The harness itself raised: a fault of ours, not of the candidate.
            return self._verdict(
                VerdictStatus.error,
                "harness_error",
                f"harness_error: the sandbox harness failed\n{outcome.raw_stderr}",
            )
        if report is None:
            if outcome.extra.get("oom_killed"):
                reason = "memory_limit"
            elif outcome.host_timed_out:
                reason = "timeout"
            elif outcome.host_output_exceeded:
                reason = "output_limit"
            else:
                reason = "harness_killed"
            message = LIMIT_MESSAGES[reason].format(**fmt)
            detail = ""
            if reason == "harness_killed":
                detail = f" (harness exit code {outcome.exit_code})"
            return self._verdict(
                VerdictStatus.failed,
                reason,
                f"{reason}: {message}{detail}",
                components={"tests_passed": 0.0, "tests_total": float(expected)},
            )
        if report.get("harness") != "ok":
            return self._verdict(
                VerdictStatus.error, "sandbox_error", f"sandbox harness: {report.get('error')}"
            )
        setup = report.get("setup")
        if setup and setup.get("exit_code") != 0:
            why = "timed out" if setup.get("timed_out") else f"exited with {setup.get('exit_code')}"
            return self._verdict(
                VerdictStatus.error,
                "setup_failed",
                f"setup_failed: the payload's setup code {why}\n" + _output_section(setup),
            )
        run: dict[str, Any] = report.get("run") or {}
        tests = _Tests.from_events(run.get("events") or [])
        names = tests.names
        if not names and tests.collect_errors:
            names = [f"collection_error_{i + 1}" for i in range(expected)]
        passed = [n for n in names if tests.passed(n)]
        total = len(names)
        all_passed = total > 0 and len(passed) == total and tests.finished

        components: dict[str, float] = {}
        for name in names[:MAX_TEST_COMPONENTS]:
            components[f"test:{name}"] = 1.0 if tests.passed(name) else 0.0
        exit_code = run.get("exit_code")
        components.update(
            tests_passed=float(len(passed)),
            tests_total=float(total),
            exit_code=float(exit_code if exit_code is not None else 128 + (run.get("signal") or 0)),
            duration_s=float(run.get("duration_s") or 0.0),
        )

        rule_ok: bool | None = None
        rule_notes: list[str] = []
        if payload.fail_to_pass is not None or payload.pass_to_pass is not None:
            rule_ok = True
            for label, wanted in (("f2p", payload.fail_to_pass), ("p2p", payload.pass_to_pass)):
                wanted = wanted or []
                ok = 0
                for entry in wanted:
                    match = _match_test(entry, names)
                    if match is not None and tests.passed(match):
                        ok += 1
                    else:
                        rule_ok = False
                        state = "not found" if match is None else "did not pass"
                        rule_notes.append(f"{label} test {entry!r} {state}")
                components[f"{label}_passed"] = float(ok)
                components[f"{label}_total"] = float(len(wanted))

        # Limits first: a killed run fails whatever its tests said.
        signal_no = run.get("signal")
        limit: str | None = None
        if report.get("pids_max_hits", 0) > 0 and not all_passed:
            limit = "pids_limit"
        elif report.get("oom_kills", 0) > 0 and not all_passed:
            limit = "memory_limit"
        elif run.get("timed_out"):
            limit = "timeout"
        elif run.get("output_exceeded"):
            limit = "output_limit"
        elif signal_no:
            limit = "crashed"
        elif run.get("strays"):
            limit = "stray_process"
        fmt.update(signal=signal_no, strays=", ".join(run.get("strays") or []))

        traceback_text = ""
        if tests.solution_error:
            traceback_text = str(tests.solution_error.get("traceback", ""))
        elif tests.first_traceback:
            traceback_text = tests.first_traceback
        elif tests.collect_errors:
            traceback_text = tests.collect_errors[0]

        verdict_reason: str | None
        if limit is not None:
            status, score, verdict_reason = VerdictStatus.failed, 0.0, limit
            headline = f"{limit}: {LIMIT_MESSAGES[limit].format(**fmt)}"
        else:
            if rule_ok is not None:
                ok = rule_ok
                score = 1.0 if ok else 0.0
            else:
                ok = all_passed
                if cfg.scoring == "all_or_nothing":
                    score = 1.0 if ok else 0.0
                else:
                    score = len(passed) / total if total else 0.0
            status = VerdictStatus.passed if ok else VerdictStatus.failed
            verdict_reason, headline = self._failure_reason(ok, tests, names, total, rule_notes)
        feedback = "\n".join(
            part for part in (headline, traceback_text.rstrip(), _output_section(run)) if part
        )
        return self._verdict(status, verdict_reason, feedback, score=score, components=components)

    @staticmethod
    def _failure_reason(
        ok: bool, tests: _Tests, names: Sequence[str], total: int, rule_notes: Sequence[str]
    ) -> tuple[str | None, str]:
        if ok:
            return None, f"all {total} tests passed"
        failing = [n for n in names if not tests.passed(n)]
        summary = f"{total - len(failing)}/{total} tests passed"
        if failing:
            summary += (
                "; failing: " + ", ".join(failing[:10]) + (" ..." if len(failing) > 10 else "")
            )
        if rule_notes:
            summary += "; " + "; ".join(rule_notes)
        sol = tests.solution_error
        if sol and sol.get("exc") in ("SyntaxError", "IndentationError", "TabError"):
            return "syntax_error", f"syntax_error: solution.py does not compile; {summary}"
        if total == 0:
            return "no_tests", "no_tests: no test was collected"
        for name in failing:
            exc_name, err = tests.exc.get(name, ("", None))
            denial = _denial_reason(exc_name, err)
            if denial:
                return denial, f"{denial}: test {name} failed with {exc_name}; {summary}"
        if not tests.finished:
            return (
                "tests_incomplete",
                f"tests_incomplete: the test process ended before all tests reported; {summary}",
            )
        return "tests_failed", f"tests_failed: {summary}"


def _output_section(run: Mapping[str, Any]) -> str:
    parts = []
    for stream in ("stdout", "stderr"):
        text = str(run.get(stream) or "")
        if text.strip():
            parts.append(
                f"--- {stream} ({run.get(f'{stream}_bytes', len(text))} bytes) ---\n{text}"
            )
    return "\n".join(parts)
