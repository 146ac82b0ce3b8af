"""The zygote (tiers/code/harness/zygote.py): candidates are forked from a clean process.

In isolation "process" every candidate of a job is a fork of one zygote that the judge started
before it read any spec. These tests look at that from the candidate's side, in a real
container: the zygote is there and is used; its memory, fds and environment are closed to the
candidate, which cannot stop or kill it either; no test the judge has read is in a
candidate's memory; what one candidate changes in its modules reaches no later one; each is a
fresh process with fresh random state, a fresh work dir and only its own fds. And when the
zygote is gone (killed, as the kernel's OOM killer may), candidates are fresh interpreters held
to the same rules; when a candidate's process made ahead of its job is gone, the judge makes
another rather than blame the candidate.
"""

from __future__ import annotations

from typing import Any

import pytest

from tiers.base import Candidate, Verdict, VerdictStatus
from tiers.code.pool import SandboxPool
from tiers.code.sandbox import SandboxTier
from tiers.code.settings import SandboxSettings

JOB = {"isolation": "process", "timeout_s": 5.0}

# What a candidate can find out about the zygote and do to it; the test compares the values.
PROBE_ZYGOTE = """
import ctypes, os, signal, sys

def from_zygote():
    return 'CANDIDATE_PROGRAM' in vars(sys.modules['__main__'])

def zygote_pids():
    found = []
    for pid in os.listdir('/proc'):
        if not pid.isdigit() or int(pid) in (1, os.getpid()):
            continue
        try:
            with open('/proc/' + pid + '/cmdline', 'rb') as fh:
                if b'-c\\x00\\x22\\x22\\x22The zygote:' in fh.read():  # not the judge's
                    found.append(int(pid))
        except OSError:
            pass
    return found

def what_worked(pid):
    worked = []
    for name in ('mem', 'maps', 'environ', 'stack', 'syscall', 'auxv'):
        try:
            with open('/proc/%d/%s' % (pid, name), 'rb') as fh:
                fh.read(1)
            worked.append(name)
        except OSError:
            pass
    try:
        os.listdir('/proc/%d/fd' % pid)
        worked.append('fd')
    except OSError:
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        worked.append('ptrace')
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(pid, sig)
            worked.append(sig.name)
        except OSError:
            pass
    return worked

def attack():
    return [what_worked(pid) for pid in zygote_pids()]
"""


def judge_job(
    tier: SandboxTier, items: list[tuple[str, str]], job: dict[str, Any] = JOB
) -> list[Verdict]:
    candidates = [Candidate(kind="code", payload={"code": c, "tests": t}) for c, t in items]
    return tier.verify_batch(candidates, job)


@pytest.fixture(scope="module")
def one_lane_tier(sandbox_settings: SandboxSettings) -> SandboxTier:
    return SandboxTier(sandbox_settings.model_copy(update={"job_containers": 1}))


def passed(verdicts: list[Verdict]) -> list[bool]:
    return [v.status is VerdictStatus.passed for v in verdicts]


def test_candidates_come_from_the_zygote_which_they_can_neither_read_nor_touch(
    one_lane_tier: SandboxTier, sandbox_pool: SandboxPool
) -> None:
    attacked = "assert from_zygote()\nassert len(zygote_pids()) == 1\nassert attack() == [[]]\n"
    # The second candidate runs after the first tried everything: the zygote still serves.
    still = "assert from_zygote()\nassert len(zygote_pids()) == 1\n"
    verdicts = judge_job(one_lane_tier, [(PROBE_ZYGOTE, attacked), (PROBE_ZYGOTE, still)])
    assert passed(verdicts) == [True, True], [v.feedback for v in verdicts]


# The judge has read tests holding MARK before it starts the next candidate; the candidate
# scans all of its own memory for it, with a pattern that does not itself hold MARK's bytes.
MARK = "vs-zygote-" + "secret-4f1c9e"
SCAN_MEMORY = """
import re
def leaks():
    pattern = re.compile(rb'vs-zygote-secre[t]-4f1c9e')
    hits = 0
    with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb', 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith('r'):
                continue
            start, end = (int(x, 16) for x in span.split('-'))
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except (OSError, OverflowError, ValueError):
                continue
            hits += len(pattern.findall(data))
    return hits
"""


def test_no_test_the_judge_has_read_is_in_a_candidates_memory(
    one_lane_tier: SandboxTier, sandbox_pool: SandboxPool
) -> None:
    planted = f"# {MARK}\nassert leaks() == 0\n"
    # Control: the scan finds MARK when it is in the candidate's memory (in its own code).
    control = SCAN_MEMORY + f"_kept = {MARK!r}\n"
    verdicts = judge_job(
        one_lane_tier, [(SCAN_MEMORY, planted), (SCAN_MEMORY, planted), (control, planted)]
    )
    assert passed(verdicts) == [True, True, False], [v.feedback for v in verdicts]


POISON = """
import builtins, collections, json, math, random, sys, typing
math.sqrt = lambda x: 0
builtins.len = lambda x: 0
builtins.sorted = lambda x, **k: [0]
collections.Counter = dict
json.dumps = lambda *a, **k: '0'
typing.List = None
random.seed(7)
sys.modules['heapq'] = None
main = sys.modules['__main__']
for name in list(vars(main)):
    if not name.startswith('__'):
        setattr(main, name, None)
def check():
    return 'poisoned'
"""

CLEAN = """
import collections, heapq, json, math, random
from typing import List
def check() -> List:
    counter = type(collections.Counter('aab')).__name__
    return [math.sqrt(16), len('abc'), sorted([3, 1, 2]), counter, json.dumps([1]),
            heapq.nsmallest(1, [5, 4]), random.random()]
"""


def test_what_a_candidate_poisons_reaches_no_later_candidate(
    one_lane_tier: SandboxTier, sandbox_pool: SandboxPool
) -> None:
    tests = (
        "got = check()\n"
        "assert got[:6] == [4.0, 3, [1, 2, 3], 'Counter', '[1]', [4]]\n"
        "assert 0 <= got[6] < 1\n"
    )
    verdicts = judge_job(one_lane_tier, [(POISON, "assert check()\n"), (CLEAN, tests)] * 2)
    # The poisoner broke its own process (its answers no longer reach the judge); each clean
    # candidate after one starts from the zygote's modules as they were.
    assert passed(verdicts)[1::2] == [True, True], [v.feedback for v in verdicts]


FRESH = """
import os, random
def facts():
    fds = sorted(int(fd) for fd in os.listdir('/proc/self/fd'))
    targets = {fd: os.readlink('/proc/self/fd/%d' % fd) for fd in range(5)}
    kinds = [targets[0] == '/dev/null'] + [targets[fd].startswith('pipe:') for fd in (1, 2, 3, 4)]
    with open('/proc/self/environ', 'rb') as fh:
        environ = sorted(fh.read().decode().split('\\0')[:-1])
    env = [os.environ.get(k) for k in ('HOME', 'TMPDIR', 'PATH')]
    return [fds[:5], kinds, os.getuid(), os.getcwd(), sorted(os.listdir('/work')),
            os.getppid(), env, environ == sorted(k + '=' + v for k, v in os.environ.items())]
def draw():
    return random.random()
"""
FRESH_TESTS = (
    "assert facts() == [[0, 1, 2, 3, 4], [True] * 5, 1000, '/work', ['.tmp', 'solution.py'], 1,"
    " ['/work', '/work/.tmp', '/usr/local/bin:/usr/bin:/bin'], True]\n"
    "assert draw() < 0, 'drew:%r' % draw()\n"  # fails, and the feedback shows the draw
)


def test_each_candidate_is_a_fresh_process_with_only_its_own_fds_and_random_state(
    one_lane_tier: SandboxTier, sandbox_pool: SandboxPool
) -> None:
    verdicts = judge_job(one_lane_tier, [(FRESH, FRESH_TESTS)] * 3)
    draws = []
    for verdict in verdicts:
        assert verdict.components["tests_passed"] == 1.0, verdict.feedback
        assert "AssertionError: drew:" in verdict.feedback, verdict.feedback
        draws.append(verdict.feedback.split("AssertionError: drew:")[1].split()[0])
    assert len(set(draws)) == 3, draws  # a copy of the zygote's random state would repeat


# Run as root in the container from the host (docker exec): SIGKILL, as the kernel's OOM killer
# would, the zygote (argv "zygote") or the candidate's process it forked ahead of the job (argv
# "candidate") once the judge has started it; print its pid. Both have the zygote's command
# line: the zygote is the first of them (root); the candidate's process is the one that runs as
# the candidate's uid. (Not merely the last: for a moment after the container starts, the last
# may be the zygote's middle process, still root, whose death loses the zygote: 2 runs in 34
# killed it, and the job's later candidates were not the zygote's.)
KILL_FORKED = (
    "import os, sys, time\n"
    "def read(p, name):\n"
    "    try:\n"
    "        return open('/proc/' + p + '/' + name, 'rb').read()\n"
    "    except OSError:\n"
    "        return b''\n"
    "mark = b'-c\\x00\\x22\\x22\\x22The zygote:'\n"
    "uid = {'zygote': b'0', 'candidate': b'1000'}[sys.argv[1]]\n"
    "def runs_as(p):\n"  # the real uid, from /proc/<pid>/status
    "    lines = [l for l in read(p, 'status').splitlines() if l.startswith(b'Uid:')]\n"
    "    return lines[0].split()[1] if lines else None\n"
    "deadline = time.monotonic() + 10\n"
    "def started(p):\n"  # clock ticks after boot; None once the process is gone
    "    fields = read(p, 'stat').rsplit(b')', 1)[-1].split()\n"
    "    return int(fields[19]) if len(fields) > 19 else None\n"
    "pid = None\n"
    "while pid is None and time.monotonic() < deadline:\n"
    "    marked = [p for p in os.listdir('/proc') if p.isdigit() and mark in read(p, 'cmdline')]\n"
    "    found = [(started(p), int(p)) for p in marked if runs_as(p) == uid]\n"
    "    found = sorted((tick, p) for tick, p in found if tick is not None)\n"
    "    if found:\n"
    "        pid = found[0][1]\n"
    "        try:\n"
    "            os.kill(pid, 9)\n"
    "        except ProcessLookupError:\n"  # it ended between the listing and the kill: again
    "            pid = None\n"
    "    if pid is None:\n"
    "        time.sleep(0.05)\n"
    # Dead (a zombie, or reaped) before the pool hands the container out: SIGKILL lands
    # later than kill() returns, by more on a loaded machine.
    "while time.monotonic() < deadline + 5:\n"
    "    state = read(str(pid), 'stat').rsplit(b')', 1)[-1].split()[:1]\n"
    "    if state in ([], [b'Z'], [b'X']):\n"
    "        break\n"
    "    time.sleep(0.01)\n"
    "print(pid)\n"
)


def killing_on_acquire(
    docker_client: Any, monkeypatch: pytest.MonkeyPatch, which: str
) -> list[str]:
    """Every container the tier's pool hands out has `which` killed first (KILL_FORKED); the
    list gets each killed pid. (The job's pool is the tier's, with its settings, not the
    fixture's: hence the class.)"""
    killed: list[str] = []
    acquire = SandboxPool.acquire

    def acquire_and_kill(pool: SandboxPool) -> str:
        cid = acquire(pool)
        command = ["python3", "-c", KILL_FORKED, which]
        run = docker_client.api.exec_create(cid, command, user="root")
        killed.append(docker_client.api.exec_start(run["Id"]).decode().strip())
        return cid

    monkeypatch.setattr(SandboxPool, "acquire", acquire_and_kill)
    return killed


# A candidate that leaves a daemon behind (double fork, own session), and one that looks for it.
LEAVE_DAEMON = """
import os
def leave():
    done, running = os.pipe()  # close-on-exec: EOF once the daemon runs sleep
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv('/bin/sleep', ['sleep', '300'])
        os._exit(0)
    os.close(running)
    os.wait()
    os.read(done, 1)
    return True
"""
FIND_DAEMON = """
import os
def others():
    mine = {1, os.getpid(), os.getppid()}
    found = []
    for pid in os.listdir('/proc'):
        if pid.isdigit() and int(pid) not in mine:
            try:
                with open('/proc/' + pid + '/cmdline', 'rb') as fh:
                    found.append(fh.read().split(b'\\0')[0])
            except OSError:
                pass
    return [name for name in found if name.endswith(b'sleep')]
"""


def test_without_a_zygote_candidates_are_fresh_interpreters_under_the_same_rules(
    one_lane_tier: SandboxTier,
    sandbox_pool: SandboxPool,
    docker_client: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The zygote dies (the OOM killer's pick) as the job starts: every candidate after the one
    it had already forked is a fresh interpreter (fork and exec), with the same uid, fds,
    environment and work dir, and a daemon one leaves is reported and gone before the next
    starts (the judge, not the zygote, kills it)."""
    killed = killing_on_acquire(docker_client, monkeypatch, "zygote")
    no_zygote = "assert not from_zygote()\nassert zygote_pids() == []\n"
    verdicts = judge_job(
        one_lane_tier,
        [
            (PROBE_ZYGOTE, "assert zygote_pids() == []\n"),
            # Control: the probe sees a daemon that is there (its own), so [] below means gone.
            (LEAVE_DAEMON + FIND_DAEMON, "assert leave()\nassert others() != []\n"),
            (PROBE_ZYGOTE + FRESH, no_zygote + FRESH_TESTS),
            (LEAVE_DAEMON, "assert leave()\n"),
            (FIND_DAEMON, "assert others() == []\n"),
            (PROBE_ZYGOTE + FRESH, no_zygote + FRESH_TESTS),
        ],
    )
    assert len(killed) == 1, killed  # one container for the job, and its zygote was there
    assert killed[0].isdigit(), killed
    # The first may have been forked (ahead of the job) before the zygote died.
    assert verdicts[0].status is VerdictStatus.passed, verdicts[0].feedback
    assert verdicts[1].reason == "stray_process", verdicts[1].feedback
    assert verdicts[1].components["tests_passed"] == 2.0, verdicts[1].feedback
    for fresh in (verdicts[2], verdicts[5]):
        # Every test but the draw's (which fails on purpose, to show the draw) passed.
        assert fresh.components["tests_passed"] == 3.0, fresh.feedback
        assert "AssertionError: drew:" in fresh.feedback, fresh.feedback
    assert verdicts[3].reason == "stray_process", verdicts[3].feedback
    assert verdicts[4].status is VerdictStatus.passed, verdicts[4].feedback


@pytest.mark.parametrize("isolation", ["process", "container"])
def test_a_candidate_process_killed_before_its_job_is_replaced_and_the_candidate_not_blamed(
    isolation: str,
    one_lane_tier: SandboxTier,
    sandbox_pool: SandboxPool,
    docker_client: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The process the judge made ahead of the job for its first candidate dies while the
    container waits in the pool (the OOM killer's pick, an operator): the judge makes another
    before it reads the spec, so the honest candidate passes (it was "crashed: signal 9"). A
    candidate that kills its own process is still blamed for it. In isolation "container"
    every candidate's container has its process killed."""
    killed = killing_on_acquire(docker_client, monkeypatch, "candidate")
    honest = ("def f():\n    return 1\n", "assert f() == 1\n")
    suicide = ("import os\ndef f():\n    os.kill(os.getpid(), 9)\n", "f()\n")
    verdicts = judge_job(
        one_lane_tier,
        [honest, (PROBE_ZYGOTE, "assert from_zygote()\n"), suicide, honest],
        dict(JOB, isolation=isolation),
    )
    # One container for the job, or one per candidate; the process was there in each.
    assert len(killed) == (1 if isolation == "process" else 4), killed
    assert all(pid.isdigit() for pid in killed), killed
    assert passed(verdicts) == [True, True, False, True], [v.feedback for v in verdicts]
    # Its own death is its failure: "crashed" (signal 9), or "tests_incomplete" when the test
    # runner reports the candidate's process gone before the judge sees the signal.
    assert verdicts[2].status is VerdictStatus.failed, verdicts[2].feedback
    assert verdicts[2].reason in ("crashed", "tests_incomplete"), verdicts[2].feedback
