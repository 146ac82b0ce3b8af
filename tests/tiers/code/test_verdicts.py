"""From a sandbox run's report to the code.sandbox verdict: pure functions, no Docker."""

from __future__ import annotations

import errno
from typing import Any

import pytest

from tiers.base import VerdictStatus
from tiers.code.attach import RunOutcome
from tiers.code.schemas import CodePayload, SandboxConfig
from tiers.code.settings import SandboxSettings
from tiers.code.verdicts import (
    Limits,
    ReportedTests,
    denial_reason,
    match_test,
    verdict_from_outcome,
)

SETTINGS = SandboxSettings(pids_limit=48, output_limit_bytes=1000)
LIMITS = Limits(timeout_s=2.5, memory_mb=128)


def passed(name: str) -> dict[str, Any]:
    return {"event": "result", "name": name, "outcome": "passed"}


def failed(name: str, **extra: Any) -> dict[str, Any]:
    return {"event": "result", "name": name, "outcome": "failed", **extra}


def report(events: list[dict[str, Any]], **run: Any) -> dict[str, Any]:
    """A harness report of a run that ended on its own, with `events` and `run` overrides."""
    return {
        "harness": "ok",
        "oom_kills": run.pop("oom_kills", 0),
        "pids_max_hits": run.pop("pids_max_hits", 0),
        "run": {"exit_code": 0, "duration_s": 0.1, "stdout": "", "stderr": "", **run,
                "events": events},
    }  # fmt: skip


def judge(
    outcome_report: dict[str, Any] | None,
    payload: dict[str, Any] | None = None,
    expected: int = 2,
    scoring: str = "fraction",
    **outcome: Any,
) -> Any:
    return verdict_from_outcome(
        RunOutcome(report=outcome_report, exit_code=outcome.pop("exit_code", 0), **outcome),
        CodePayload.model_validate(payload or {"code": "x = 1", "tests": "assert x"}),
        SandboxConfig.model_validate({"scoring": scoring}),
        SETTINGS,
        LIMITS,
        expected,
    )


COLLECTED = {"event": "collected", "tests": ["test_a", "test_b"]}
FINISHED = {"event": "finished"}


def test_all_tests_passed() -> None:
    v = judge(report([COLLECTED, passed("test_a"), passed("test_b"), FINISHED]))
    assert (v.status, v.score, v.reason) == (VerdictStatus.passed, 1.0, None)
    assert v.components["test:test_a"] == v.components["test:test_b"] == 1.0
    assert (v.components["tests_passed"], v.components["tests_total"]) == (2.0, 2.0)
    assert v.feedback.startswith("all 2 tests passed")
    assert (v.tier, v.tier_version) == ("code.sandbox", "1")


@pytest.mark.parametrize(("scoring", "score"), [("fraction", 0.5), ("all_or_nothing", 0.0)])
def test_some_tests_failed_scores_by_the_config(scoring: str, score: float) -> None:
    events = [COLLECTED, passed("test_a"), failed("test_b", traceback="AssertionError: 3 != 4")]
    v = judge(report([*events, FINISHED], exit_code=1), scoring=scoring)
    assert (v.status, v.score, v.reason) == (VerdictStatus.failed, score, "tests_failed")
    assert "tests_failed: 1/2 tests passed; failing: test_b" in v.feedback
    assert "AssertionError: 3 != 4" in v.feedback


def test_a_killed_run_fails_at_its_limit_whatever_the_tests_said() -> None:
    v = judge(report([COLLECTED, passed("test_a")], timed_out=True, exit_code=None, signal=9))
    assert (v.status, v.score, v.reason) == (VerdictStatus.failed, 0.0, "timeout")
    assert "did not finish within 2.5 s" in v.feedback
    v = judge(report([COLLECTED, passed("test_a"), FINISHED], pids_max_hits=3))
    assert v.reason == "pids_limit"
    assert "(48 processes)" in v.feedback
    v = judge(report([COLLECTED, FINISHED], output_exceeded=True))
    assert v.reason == "output_limit"
    assert "more than 1000 bytes" in v.feedback


def test_pids_hits_do_not_fail_a_run_whose_tests_all_passed() -> None:
    v = judge(report([COLLECTED, passed("test_a"), passed("test_b"), FINISHED], pids_max_hits=1))
    assert v.status is VerdictStatus.passed


def test_no_report_means_the_host_or_the_kernel_stopped_it() -> None:
    oom = judge(None, exit_code=137, extra={"oom_killed": True})
    assert (oom.status, oom.reason) == (VerdictStatus.failed, "memory_limit")
    assert "limit 128 MB" in oom.feedback
    assert oom.components == {"tests_passed": 0.0, "tests_total": 2.0}
    killed = judge(None, exit_code=137, host_timed_out=True)
    assert killed.reason == "timeout"
    gone = judge(None, exit_code=9)
    assert gone.reason == "harness_killed"
    assert "(harness exit code 9)" in gone.feedback


def test_a_broken_harness_is_our_error_not_the_candidates() -> None:
    v = judge(None, exit_code=1, raw_stderr="Traceback (most recent call last):\n  boom")
    assert (v.status, v.reason, v.score) == (VerdictStatus.error, "harness_error", None)
    v = judge({"harness": "resource", "error": "No space left"})
    assert (v.status, v.reason) == (VerdictStatus.error, "sandbox_error")


def test_failed_setup_is_an_error() -> None:
    setup = {"exit_code": 2, "stderr": "no module", "stderr_bytes": 9}
    v = judge({"harness": "ok", "setup": setup})
    assert (v.status, v.reason) == (VerdictStatus.error, "setup_failed")
    assert "exited with 2" in v.feedback
    assert "--- stderr (9 bytes) ---\nno module" in v.feedback


def test_syntax_error_in_the_solution() -> None:
    events = [
        COLLECTED,
        {"event": "solution_error", "exc": "SyntaxError", "traceback": "SyntaxError: bad"},
        failed("test_a"),
        failed("test_b"),
        FINISHED,
    ]
    v = judge(report(events, exit_code=1))
    assert v.reason == "syntax_error"
    assert "SyntaxError: bad" in v.feedback


def test_a_test_that_hit_a_sandbox_denial_names_it() -> None:
    events = [
        COLLECTED,
        passed("test_a"),
        failed("test_b", exc="OSError", errno=errno.ENETUNREACH),
        FINISHED,
    ]
    v = judge(report(events, exit_code=1))
    assert v.reason == "network_disabled"
    assert "test test_b failed with OSError" in v.feedback


def test_no_tests_and_unfinished_runs() -> None:
    assert judge(report([{"event": "collected", "tests": []}, FINISHED])).reason == "no_tests"
    v = judge(report([COLLECTED, passed("test_a"), passed("test_b")]))  # no "finished"
    assert (v.status, v.reason) == (VerdictStatus.failed, "tests_incomplete")


def test_fail_to_pass_rule_decides_the_score() -> None:
    payload = {
        "code": "x = 1",
        "tests": "def test_a(): pass",
        "fail_to_pass": ["test_solution.py::test_a"],
        "pass_to_pass": ["test_c"],
    }
    events = [COLLECTED, passed("test_a"), failed("test_b"), FINISHED]
    v = judge(report(events, exit_code=1), payload=payload)
    assert (v.status, v.score) == (VerdictStatus.failed, 0.0)
    assert (v.components["f2p_passed"], v.components["f2p_total"]) == (1.0, 1.0)
    assert (v.components["p2p_passed"], v.components["p2p_total"]) == (0.0, 1.0)
    assert "p2p test 'test_c' not found" in v.feedback
    payload["pass_to_pass"] = []
    v = judge(report(events, exit_code=1), payload=payload)
    assert (v.status, v.score) == (VerdictStatus.passed, 1.0)  # test_b is in neither list


def test_reported_tests_keep_the_worst_outcome_of_a_test() -> None:
    tests = ReportedTests.from_events(
        [
            COLLECTED,
            failed("test_a", exc="MemoryError"),
            passed("test_a"),  # a teardown report after the failing call
            {"event": "result", "name": "test_b", "outcome": "skipped"},
            passed("test_b"),
            passed("test_extra"),  # never collected: cannot add a pass
            failed("test_a_setup"),  # never collected, but a failure: counts against
        ]
    )
    assert tests.names == ["test_a", "test_b", "test_a_setup"]
    assert tests.outcome == {"test_a": "failed", "test_b": "skipped", "test_a_setup": "failed"}
    assert tests.exc["test_a"] == ("MemoryError", None)
    assert not tests.finished


def test_denial_reasons_and_test_matching() -> None:
    assert denial_reason("MemoryError", None) == "memory_limit"
    assert denial_reason("OSError", errno.ENOSPC) == "disk_limit"
    assert denial_reason("BlockingIOError", errno.EAGAIN) == "pids_limit"
    assert denial_reason("PermissionError", errno.EACCES) == "permission_denied"
    assert denial_reason("ValueError", None) is None
    assert match_test("tests.py::test_x", ["test_x"]) == "test_x"
    assert match_test("test_x", ["test_x"]) == "test_x"
    assert match_test("other.txt::test_x", ["test_x"]) is None


def test_invented_passing_names_do_not_dilute_a_failure() -> None:
    # Issue 14: 98 passing results under names the tests never had turned 0 into 0.98.
    events = [{"event": "collected", "tests": ["test_real"]}, failed("test_real")]
    events += [passed(f"invented_{i}") for i in range(98)] + [{"event": "finished"}]
    v = judge(report(events), expected=1)
    assert (v.status, v.score) == (VerdictStatus.failed, 0.0)
    assert v.components["tests_total"] == 1.0


def test_an_expected_failure_is_not_a_pass() -> None:
    events = [COLLECTED, passed("test_a"), {"event": "result", "name": "test_b",
              "outcome": "xfailed", "when": "call"}, {"event": "finished"}]  # fmt: skip
    v = judge(report(events))
    assert (v.status, v.score) == (VerdictStatus.failed, 0.5)
