"""From a sandbox run to a verdict: pure functions of the harness's report, no Docker.

The harness reports per-test events (collected, result, exc, solution_error, collect_error,
finished), the run's exit, and what the container's cgroup saw (OOM kills, pids limit hits);
the host adds whether it had to kill the container. This module turns that into the verdict of
the code.sandbox tier: status, score, per-test components, a reason, and feedback a model can
learn from.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tiers.base import Verdict, VerdictStatus
from tiers.code.attach import RunOutcome
from tiers.code.schemas import CodePayload, SandboxConfig
from tiers.code.settings import SandboxSettings

TIER_NAME = "code.sandbox"
TIER_VERSION = "1"
MAX_TEST_COMPONENTS = 256

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


@dataclass
class ReportedTests:
    """Per-test outcomes gathered from the harness's events."""

    names: list[str] = field(default_factory=list)
    outcome: dict[str, str] = field(default_factory=dict)
    exc: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    first_traceback: str = ""
    solution_error: dict[str, Any] | None = None
    collect_errors: list[str] = field(default_factory=list)
    finished: bool = False
    monitor: list[str] = field(default_factory=list)

    @classmethod
    def from_events(cls, events: Sequence[Mapping[str, Any]]) -> ReportedTests:
        tests = cls()
        collected = False
        for event in events:
            kind = event.get("event")
            name = str(event.get("name", ""))
            if kind == "collected" and not collected:
                collected = True
                tests.names = [str(n) for n in event.get("tests") or []]
            elif kind == "result" and name:
                outcome = str(event.get("outcome"))
                if name not in tests.names:
                    if outcome != "failed":
                        # Only the collection names the tests: a result for a name it never
                        # listed can lower the score (a setup failure), never raise it.
                        continue
                    tests.names.append(name)
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
            elif kind == "monitor":
                tests.monitor = sorted({str(s)[:60] for s in event.get("signals") or []})[:20]
        return tests

    def passed(self, name: str) -> bool:
        return self.outcome.get(name) == "passed"


def denial_reason(exc_name: str, err: int | None) -> str | None:
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


def match_test(wanted: str, names: Sequence[str]) -> str | None:
    """The collected test a F2P/P2P entry means: exact, or a pytest node id of it."""
    if wanted in names:
        return wanted
    if "::" in wanted:
        head, _, rest = wanted.partition("::")
        if head.endswith(".py") and rest in names:
            return rest
    return None


@dataclass
class Limits:
    """The limits one candidate runs under (payload, else config, else settings; capped)."""

    timeout_s: float
    memory_mb: int

    @classmethod
    def of(cls, payload: CodePayload, cfg: SandboxConfig, settings: SandboxSettings) -> Limits:
        return cls(
            timeout_s=min(
                payload.timeout_s or cfg.timeout_s or settings.default_timeout_s,
                settings.max_timeout_s,
            ),
            memory_mb=min(
                payload.memory_mb or cfg.memory_mb or settings.default_memory_mb,
                settings.max_memory_mb,
            ),
        )


def code_verdict(
    status: VerdictStatus,
    reason: str | None,
    feedback: str = "",
    score: float | None = None,
    components: dict[str, float] | None = None,
) -> Verdict:
    """A verdict of the code.sandbox tier; failed and passed ones always carry a score."""
    if score is None and status is not VerdictStatus.error:
        score = 0.0
    return Verdict(
        status=status,
        score=score,
        components=components or {},
        feedback=feedback,
        reason=reason,
        tier=TIER_NAME,
        tier_version=TIER_VERSION,
    )


def verdict_from_outcome(
    outcome: RunOutcome,
    payload: CodePayload,
    cfg: SandboxConfig,
    settings: SandboxSettings,
    limits: Limits,
    expected: int,
) -> Verdict:
    """The verdict on a candidate from what its sandbox run reported.

    `expected` is the number of tests the tests' source declares (detect_test_style), used when
    the run reported none. A run stopped by a limit fails whatever its tests said; a harness
    that broke is an error of ours; otherwise the score follows cfg.scoring or the payload's
    fail_to_pass/pass_to_pass rule.
    """
    fmt: dict[str, Any] = {
        "pids": settings.pids_limit,
        "memory_mb": limits.memory_mb,
        "timeout_s": limits.timeout_s,
        "output_limit": settings.output_limit_bytes,
    }
    report = outcome.report
    if report is None and outcome.exit_code == 1 and "Traceback" in outcome.raw_stderr:
        # The harness itself raised: a fault of ours, not of the candidate.
        return code_verdict(
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
        return code_verdict(
            VerdictStatus.failed,
            reason,
            f"{reason}: {message}{detail}",
            components={"tests_passed": 0.0, "tests_total": float(expected)},
        )
    if report.get("harness") != "ok":
        return code_verdict(
            VerdictStatus.error, "sandbox_error", f"sandbox harness: {report.get('error')}"
        )
    setup = report.get("setup")
    if setup and setup.get("exit_code") != 0:
        why = "timed out" if setup.get("timed_out") else f"exited with {setup.get('exit_code')}"
        return code_verdict(
            VerdictStatus.error,
            "setup_failed",
            f"setup_failed: the payload's setup code {why}\n" + output_section(setup),
        )
    run: dict[str, Any] = report.get("run") or {}
    tests = ReportedTests.from_events(run.get("events") or [])
    names = tests.names
    if not names and tests.collect_errors:
        names = [f"collection_error_{i + 1}" for i in range(expected)]
    passed = [n for n in names if tests.passed(n)]
    total = len(names)
    all_passed = total > 0 and len(passed) == total and tests.finished

    components: dict[str, float] = {}
    for name in names[:MAX_TEST_COMPONENTS]:
        components[f"test:{name}"] = 1.0 if tests.passed(name) else 0.0
    for signal_name in tests.monitor:
        components[f"monitor:{signal_name}"] = 1.0
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
                match = match_test(entry, names)
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
        verdict_reason, headline = failure_reason(ok, tests, names, total, rule_notes)
    feedback = "\n".join(
        part for part in (headline, traceback_text.rstrip(), output_section(run)) if part
    )
    return code_verdict(status, verdict_reason, feedback, score=score, components=components)


def failure_reason(
    ok: bool, tests: ReportedTests, names: Sequence[str], total: int, rule_notes: Sequence[str]
) -> tuple[str | None, str]:
    """(reason, headline) of a run that no limit stopped: why it did not pass, or None."""
    if ok:
        return None, f"all {total} tests passed"
    failing = [n for n in names if not tests.passed(n)]
    summary = f"{total - len(failing)}/{total} tests passed"
    if failing:
        summary += "; failing: " + ", ".join(failing[:10]) + (" ..." if len(failing) > 10 else "")
    if rule_notes:
        summary += "; " + "; ".join(rule_notes)
    sol = tests.solution_error
    if sol and sol.get("exc") == "CompileError":
        return "compile_error", f"compile_error: the program does not compile; {summary}"
    if sol and sol.get("exc") in ("SyntaxError", "IndentationError", "TabError"):
        return "syntax_error", f"syntax_error: solution.py does not compile; {summary}"
    if total == 0:
        return "no_tests", "no_tests: no test was collected"
    for name in failing:
        if tests.exc.get(name, ("", None))[0] == "OpaqueValueError":
            return "opaque_value", (
                f"opaque_value: test {name} compared a value of the candidate's that is not "
                f"plain data; the judge does not let the candidate's code decide it; {summary}"
            )
    for name in failing:
        exc_name, err = tests.exc.get(name, ("", None))
        denial = denial_reason(exc_name, err)
        if denial:
            return denial, f"{denial}: test {name} failed with {exc_name}; {summary}"
    if not tests.finished:
        return (
            "tests_incomplete",
            f"tests_incomplete: the test process ended before all tests reported; {summary}",
        )
    return "tests_failed", f"tests_failed: {summary}"


def output_section(run: Mapping[str, Any]) -> str:
    parts = []
    for stream in ("stdout", "stderr"):
        text = str(run.get(stream) or "")
        if text.strip():
            parts.append(
                f"--- {stream} ({run.get(f'{stream}_bytes', len(text))} bytes) ---\n{text}"
            )
    return "\n".join(parts)
