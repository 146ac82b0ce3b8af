"""Isolation "process": one container per job, each candidate in a fresh process.

A policy that samples a group of answers to one task sends them in one request, so they share
a container. Nothing one of them leaves behind may reach the next: not a background process,
not a file in the work dir, /tmp, /mnt (writable scratch, as in SandboxFusion), /dev/shm or
/dev/mqueue, not a System V IPC object. Each hack below
is the first candidate of a job; the second is a probe that scores only if it finds any trace
of the first, and otherwise answers wrong. Real Docker engine, real sandbox image.
"""

from __future__ import annotations

from typing import Any

import pytest

from tiers.base import Candidate, Verdict, VerdictStatus
from tiers.code import sandbox as sandbox_module
from tiers.code.pool import SandboxPool
from tiers.code.sandbox import SandboxTier
from tiers.code.session import JobContainer
from tiers.code.settings import SandboxSettings

TESTS = "assert add(2, 3) == 5\nassert add(10, -4) == 6\n"
RIGHT = "def add(a, b):\n    return a + b\n"
ONE_CONTAINER = {"isolation": "process", "timeout_s": 3.0}

# Scores 1 only if it finds a trace of an earlier candidate, else 0 (it answers a - b).
PROBE = """
import ctypes, os
def _traces():
    found = []
    me = os.getpid()
    for pid in os.listdir('/proc'):
        if pid.isdigit() and int(pid) != me:
            try:
                if os.stat('/proc/' + pid).st_uid == os.getuid():
                    found.append('process ' + pid)
            except OSError:
                pass
    for path in ('/work', '/dev/shm', '/dev/mqueue', '/tmp', '/mnt'):
        try:
            names = [n for n in os.listdir(path) if n not in ('.tmp', 'solution.py')]
        except OSError:
            continue
        found += [path + '/' + n for n in names]
    try:
        found += ['/work/.tmp/' + n for n in os.listdir('/work/.tmp')]
    except OSError:
        pass
    libc = ctypes.CDLL(None)
    if libc.shmget(0x5EED, 0, 0) >= 0:
        found.append('sysv shm')
    if libc.semget(0x5EED, 0, 0) >= 0:
        found.append('sysv sem')
    if libc.msgget(0x5EED, 0) >= 0:
        found.append('sysv msg')
    try:
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.connect('\\0vs-answers')
        found.append('abstract socket')
    except OSError:
        pass
    return found
def add(a, b):
    return a + b if _traces() else a - b
"""

# Leaves everything it can behind: a detached process that keeps answering on a socket and
# rewriting files, files everywhere it can write (one in a directory it locked), IPC objects.
LEAVE_TRACES = """
import ctypes, os, socket, time
def _leave():
    for path in ('/work/answers', '/work/.tmp/answers', '/dev/shm/answers', '/tmp/answers',
                 '/mnt/answers', '/dev/mqueue/answers'):
        try:
            with open(path, 'w') as fh:
                fh.write('5 6')
        except OSError:
            pass
    try:
        os.makedirs('/work/locked/deeper')
        open('/work/locked/deeper/answers', 'w').write('5 6')
        os.chmod('/work/locked/deeper', 0)
        os.chmod('/work/locked', 0)
    except OSError:
        pass
    libc = ctypes.CDLL(None)
    libc.shmget(0x5EED, 4096, 0o1000 | 0o666)
    libc.semget(0x5EED, 1, 0o1000 | 0o666)
    libc.msgget(0x5EED, 0o1000 | 0o666)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            server = socket.socket(socket.AF_UNIX)
            server.bind('\\0vs-answers')
            server.listen(8)
            deadline = time.time() + 30
            while time.time() < deadline:
                try:
                    open('/work/answers', 'w').write('5 6')
                except OSError:
                    pass
                time.sleep(0.02)
        os._exit(0)
_leave()
def add(a, b):
    return a + b
"""


class JobSpy:
    """The containers each job (each JobContainer the tier made) ran its candidates in."""

    def __init__(self) -> None:
        self.jobs: list[JobContainer] = []

    def containers(self) -> list[list[str]]:
        return [list(job.container_ids) for job in self.jobs]


@pytest.fixture
def job_spy(monkeypatch: pytest.MonkeyPatch) -> JobSpy:
    spy = JobSpy()

    class Recorded(JobContainer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            spy.jobs.append(self)

    monkeypatch.setattr(sandbox_module, "JobContainer", Recorded)
    return spy


@pytest.fixture(scope="module")
def one_lane_tier(sandbox_settings: SandboxSettings) -> SandboxTier:
    """The tier with every job in one container (the pool is the session's, the same
    settings but one container per job)."""
    return SandboxTier(sandbox_settings.model_copy(update={"job_containers": 1}))


def judge_job(tier: SandboxTier, codes: list[str], config: dict[str, Any]) -> list[Verdict]:
    items = [Candidate(kind="code", payload={"code": c, "tests": TESTS}) for c in codes]
    return tier.verify_batch(items, config)


def test_the_probe_finds_traces_when_they_are_there(
    one_lane_tier: SandboxTier, sandbox_pool: SandboxPool
) -> None:
    """The probe scores when a trace exists (here its own job's file), so a 0 below means it
    found nothing, not that it cannot look."""
    planted = "open('/work/answers', 'w').write('5 6')\n" + PROBE
    (verdict,) = judge_job(one_lane_tier, [planted], ONE_CONTAINER)
    assert verdict.score == 1.0, verdict.feedback
    (alone,) = judge_job(one_lane_tier, [PROBE], ONE_CONTAINER)
    assert alone.score == 0.0, alone.feedback


def test_nothing_a_candidate_leaves_reaches_the_next_in_its_container(
    one_lane_tier: SandboxTier, sandbox_pool: SandboxPool, job_spy: JobSpy
) -> None:
    verdicts = judge_job(one_lane_tier, [LEAVE_TRACES, PROBE, LEAVE_TRACES, PROBE], ONE_CONTAINER)
    # The daemon it left is reported and costs the hack its score, as in container mode.
    assert verdicts[0].reason == "stray_process", verdicts[0].feedback
    assert [v.score for v in verdicts] == [0.0] * 4, [v.feedback for v in verdicts]
    # The probe ran (both tests judged) and found nothing: it answered wrong.
    assert verdicts[1].status is VerdictStatus.failed
    assert verdicts[1].components["tests_total"] == 2.0
    assert verdicts[1].reason == "tests_failed", verdicts[1].feedback
    # The job ran in one container: the probe shared it with the hack, and still saw nothing.
    used = {cid for job in job_spy.containers() for cid in job}
    assert len(used) == 1, used


def test_jobs_never_share_a_container(
    one_lane_tier: SandboxTier, sandbox_pool: SandboxPool, job_spy: JobSpy
) -> None:
    judge_job(one_lane_tier, [RIGHT, RIGHT], ONE_CONTAINER)
    judge_job(one_lane_tier, [RIGHT, RIGHT], ONE_CONTAINER)
    first, second = [set(job) for job in job_spy.containers()]
    assert first
    assert second
    assert not first & second


def test_a_candidate_killed_at_its_deadline_leaves_the_next_a_clean_start(
    one_lane_tier: SandboxTier, sandbox_pool: SandboxPool
) -> None:
    hang = LEAVE_TRACES.replace("return a + b", "import time\n    time.sleep(60)")
    verdicts = judge_job(one_lane_tier, [hang, RIGHT, PROBE], {**ONE_CONTAINER, "timeout_s": 1.0})
    assert verdicts[0].reason == "timeout", verdicts[0].feedback
    assert verdicts[1].status is VerdictStatus.passed, verdicts[1].feedback
    assert verdicts[2].score == 0.0, verdicts[2].feedback


def test_each_candidate_has_its_own_limits_and_process(
    one_lane_tier: SandboxTier, sandbox_pool: SandboxPool
) -> None:
    code = (
        "import os, resource\n"
        "assert resource.getrlimit(resource.RLIMIT_CPU)[0] <= 10\n"
        "assert os.getuid() == 1000 and os.listdir('/work') in (['solution.py', '.tmp'], "
        "['.tmp', 'solution.py'])\n"
        "_state = []\n"
        "def add(a, b):\n    _state.append(1)\n    return a + b if len(_state) == 1 else 0\n"
    )
    tests = "assert add(2, 3) == 5\n"
    items = [Candidate(kind="code", payload={"code": code, "tests": tests}) for _ in range(3)]
    verdicts = one_lane_tier.verify_batch(items, ONE_CONTAINER)
    assert [v.status for v in verdicts] == [VerdictStatus.passed] * 3, [
        v.feedback for v in verdicts
    ]


def test_container_isolation_is_still_there(
    tier: SandboxTier, sandbox_pool: SandboxPool, job_spy: JobSpy
) -> None:
    verdicts = judge_job(tier, [LEAVE_TRACES, PROBE], {"isolation": "container"})
    assert [v.score for v in verdicts] == [0.0, 0.0]
    assert verdicts[1].reason == "tests_failed", verdicts[1].feedback
    assert job_spy.jobs == []  # no job container: one container per candidate
