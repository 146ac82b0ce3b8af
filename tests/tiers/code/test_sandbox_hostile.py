"""Hostile candidates: each ends in a failed verdict with a clear reason, the host and the worker
stay healthy, and the container it ran in is gone afterwards (the `judge` fixture checks that)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from tiers.base import Verdict, VerdictStatus
from tiers.code.pool import SandboxPool

Judge = Callable[..., Verdict]
QUICK = {"timeout_s": 2.0}


@pytest.fixture(autouse=True)
def _still_healthy(judge: Judge, docker_client: Any, sandbox_pool: SandboxPool) -> Any:
    """After each hostile case the engine answers and the pool still judges a good candidate."""
    yield
    assert docker_client.ping()
    verdict = judge("def inc(x):\n    return x + 1\n", "assert inc(1) == 2\n")
    assert verdict.status is VerdictStatus.passed, verdict.feedback


def assert_failed(verdict: Verdict, reason: str | set[str]) -> None:
    reasons = {reason} if isinstance(reason, str) else reason
    assert verdict.status is VerdictStatus.failed, verdict
    assert verdict.reason in reasons, (verdict.reason, verdict.feedback[:2000])
    assert verdict.score == 0.0
    assert verdict.reason is not None
    assert verdict.feedback.startswith(verdict.reason), verdict.feedback[:300]


def test_fork_bomb_hits_the_pids_limit(judge: Judge) -> None:
    code = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    # 5 s, not QUICK's 2: on a loaded machine the container's pytest can take most of 2 s to
    # start, and a bomb stopped by the timeout before its first fork is not the case under test.
    verdict = judge(code, "assert True\n", {"timeout_s": 5.0})
    assert_failed(verdict, "pids_limit")
    assert "process limit" in verdict.feedback


def test_memory_bomb_is_killed_at_the_memory_limit(judge: Judge) -> None:
    code = "blocks = []\nwhile True:\n    blocks.append(bytearray(8 * 1024 * 1024))\n"
    verdict = judge(code, "assert True\n", QUICK)
    assert_failed(verdict, "memory_limit")
    assert "128 MB" in verdict.feedback


def test_infinite_loop_times_out(judge: Judge) -> None:
    started = time.monotonic()
    verdict = judge("def f():\n    while True:\n        pass\n", "f()\nassert True\n", QUICK)
    assert_failed(verdict, "timeout")
    assert time.monotonic() - started < 2.0 + 4.0


def test_sleep_past_the_timeout_is_killed_on_time(judge: Judge) -> None:
    started = time.monotonic()
    verdict = judge("import time\ntime.sleep(60)\n", "assert True\n", QUICK)
    assert_failed(verdict, "timeout")
    assert 1.9 < verdict.components.get("duration_s", 2.0) < 3.0
    assert time.monotonic() - started < 2.0 + 4.0


def test_100_mb_of_stdout_is_cut_off(judge: Judge) -> None:
    code = "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * (1024 * 1024))\n"
    verdict = judge(code, "assert True\n", QUICK)
    assert_failed(verdict, "output_limit")
    assert len(verdict.feedback) < 64 * 1024


def test_socket_to_the_outside_is_refused(judge: Judge) -> None:
    code = (
        "import socket\n"
        "def fetch():\n"
        "    with socket.create_connection(('1.1.1.1', 80), timeout=1) as s:\n"
        "        return s.recv(10)\n"
    )
    verdict = judge(code, "def test_fetch():\n    assert fetch() is not None\n", QUICK)
    assert_failed(verdict, "network_disabled")
    assert "OSError" in verdict.feedback or "unreachable" in verdict.feedback


def test_dns_lookup_finds_no_network(judge: Judge) -> None:
    code = "import socket\nADDR = socket.getaddrinfo('example.com', 443)\n"
    verdict = judge(code, "assert ADDR\n", QUICK)
    assert_failed(verdict, {"network_disabled", "tests_failed"})
    assert "gaierror" in verdict.feedback


def test_writing_to_the_root_filesystem_fails(judge: Judge) -> None:
    code = "def tamper():\n    with open('/usr/lib/evil.py', 'w') as fh:\n        fh.write('x')\n"
    verdict = judge(code, "tamper()\nassert True\n", QUICK)
    assert_failed(verdict, "read_only_filesystem")
    assert "Read-only file system" in verdict.feedback


def test_filling_the_tmpfs_stops_at_its_size(judge: Judge) -> None:
    code = (
        "def fill():\n"
        "    with open('/work/big.bin', 'wb') as fh:\n"
        "        while True:\n"
        "            fh.write(b'0' * (1024 * 1024))\n"
        "            fh.flush()\n"
    )
    verdict = judge(code, "fill()\nassert True\n", QUICK)
    assert_failed(verdict, "disk_limit")
    assert "No space left on device" in verdict.feedback


def test_host_environment_and_files_are_out_of_reach(
    judge: Judge, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cr3t-" + os.urandom(4).hex()
    monkeypatch.setenv("VERIFIER_TEST_HOST_SECRET", secret)
    code = (
        "import os\n"
        "SEEN = dict(os.environ)\n"
        "for path in ('/proc/1/environ', '/proc/self/environ'):\n"
        "    try:\n"
        "        print(path, open(path, 'rb').read())\n"
        "    except PermissionError as exc:\n"  # the judge's (PID 1) is not the candidate's
        "        print(path, exc)\n"
        "print(SEEN)\n"
    )
    host_file = os.path.abspath(__file__)
    tests = (
        "assert 'VERIFIER_TEST_HOST_SECRET' in SEEN\n"
        f"assert os.path.exists({host_file!r})\n"
        "assert os.path.exists('/var/run/docker.sock')\n"
    )
    verdict = judge(code, tests, QUICK)
    assert_failed(verdict, "tests_failed")
    assert verdict.components["tests_passed"] == 0.0
    assert secret not in verdict.feedback
    assert "HOME" in verdict.feedback  # the candidate did print its (container) environment
    assert socket.gethostname() not in verdict.feedback


def test_killing_its_own_parent_does_not_escape_judgement(judge: Judge) -> None:
    # The harness is the container's PID 1 under another uid: the kill is refused, the attack
    # changes nothing and the failing tests are still reported as such.
    code = (
        "import os, signal\ntry:\n    os.kill(os.getppid(), signal.SIGKILL)\n"
        "except PermissionError:\n    pass\ndef answer():\n    return 41\n"
    )
    verdict = judge(code, "assert answer() == 42\n", QUICK)
    assert_failed(verdict, "tests_failed")
    assert "assert answer() == 42" in verdict.feedback


def test_killing_every_process_it_can_does_not_escape_judgement(judge: Judge) -> None:
    code = (
        "import os, signal\n"
        "for target in (-1, 1, os.getppid()):\n"
        "    try:\n"
        "        os.kill(target, signal.SIGKILL)\n"
        "    except OSError:\n"
        "        pass\n"
        "def answer():\n    return 41\n"
    )
    verdict = judge(code, "def test_answer():\n    assert answer() == 42\n", QUICK)
    assert_failed(verdict, "tests_failed")
    assert verdict.components["test:test_answer"] == 0.0


def test_a_process_that_outlives_the_test_fails_and_is_killed(judge: Judge) -> None:
    code = (
        "import subprocess\n"
        "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
        "def ok():\n    return True\n"
    )
    started = time.monotonic()
    verdict = judge(code, "assert ok()\n", QUICK)
    assert_failed(verdict, "stray_process")
    assert "sleep" in verdict.feedback
    assert time.monotonic() - started < 2.0  # no wait for the stray: it is killed at once


def test_a_daemon_holding_stdout_open_does_not_stall_the_run(judge: Judge) -> None:
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    while True:\n"
        "        print('still here', flush=True)\n"
        "        time.sleep(0.01)\n"
    )
    verdict = judge(code, "assert True\n", QUICK)
    assert_failed(verdict, "stray_process")


def test_exiting_early_to_skip_the_tests_does_not_pass(judge: Judge) -> None:
    code = "import os\nos._exit(0)\n"
    verdict = judge(code, "assert False\nassert False\n", QUICK)
    assert verdict.status is VerdictStatus.failed
    assert verdict.reason == "tests_incomplete"
    assert verdict.score == 0.0


def test_sys_exit_in_a_pytest_run_does_not_pass(judge: Judge) -> None:
    code = "import sys\ndef add(a, b):\n    sys.exit(0)\n"
    verdict = judge(code, "def test_add():\n    assert add(1, 2) == 3\n", QUICK)
    assert verdict.status is VerdictStatus.failed
    assert verdict.score == 0.0
