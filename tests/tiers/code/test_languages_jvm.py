"""Java's JVM under the sandbox's limits: the heap follows the run's memory limit, the JVM's own
threads leave room under the process limit, and a thread bomb is stopped by it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tiers.base import Candidate, Verdict, VerdictStatus
from tiers.code.languages import get_language, jvm_heap_mb
from tiers.code.sandbox import SandboxTier
from tiers.code.sandbox_languages import language_built, shutdown_language_pools
from tiers.code.settings import SandboxSettings

# Keeps `mb` megabytes of arrays alive, touched, then prints how many it holds.
KEEP = (
    "import java.util.*;\npublic class Main { public static void main(String[] args) {\n"
    "  int mb = new Scanner(System.in).nextInt(); List<byte[]> keep = new ArrayList<>();\n"
    "  for (int i = 0; i < mb / 8; i++) { byte[] b = new byte[8 << 20]; Arrays.fill(b, (byte) 1);"
    " keep.add(b); }\n"
    "  System.out.println(keep.size() * 8); } }\n"
)
# Starts `n` threads that each wait for the others, then prints how many ran.
THREADS = (
    "import java.util.concurrent.*;\npublic class Main {\n"
    "  public static void main(String[] args) throws Exception {\n"
    "    int n = new java.util.Scanner(System.in).nextInt(); CyclicBarrier all = "
    "new CyclicBarrier(n + 1);\n"
    "    for (int i = 0; i < n; i++) new Thread(() -> { try { all.await(); } "
    "catch (Exception e) { } }).start();\n"
    "    all.await(); System.out.println(n); } }\n"
)
THREAD_BOMB = (
    "public class Main { public static void main(String[] args) { while (true) {\n"
    "  new Thread(() -> { try { Thread.sleep(60000); } catch (InterruptedException e) { } })"
    ".start(); } } }\n"
)


@pytest.fixture(scope="module")
def tier(sandbox_settings: SandboxSettings) -> Iterator[SandboxTier]:
    settings = sandbox_settings.model_copy(update={"language_pool_size": 1})
    if not language_built(get_language("java"), settings):
        pytest.fail(
            "the sandbox image of java is not built: run "
            "`verifier-service sandbox build-image --language java`",
            pytrace=False,
        )
    yield SandboxTier(settings)
    shutdown_language_pools()


def judge(tier: SandboxTier, code: str, stdin: str, stdout: str, **payload: Any) -> Verdict:
    body = {
        "language": "java",
        "code": code,
        "cases": [{"stdin": stdin, "stdout": stdout}],
        "case_timeout_s": 10.0,
        "timeout_s": 20.0,
        **payload,
    }
    return tier.verify_batch([Candidate(kind="code", payload=body)], {})[0]


def test_heap_follows_the_runs_memory_limit(tier: SandboxTier) -> None:
    # 320 MB of arrays: more than the JVM's own default heap in this container (a quarter of
    # its 768 MB), within a 512 MB run's heap, beyond a 256 MB run's.
    assert jvm_heap_mb(256) < 320 < jvm_heap_mb(512)
    roomy = judge(tier, KEEP, "320\n", "320\n", memory_mb=512)
    assert roomy.status is VerdictStatus.passed, roomy.feedback
    tight = judge(tier, KEEP, "320\n", "320\n", memory_mb=256)
    assert tight.status is VerdictStatus.failed, tight.feedback
    assert "OutOfMemoryError" in tight.feedback


def test_program_threads_fit_beside_the_jvms_own(tier: SandboxTier) -> None:
    # 20 of the program's own beside the JVM's 14 and the harness's, under the tests' pids
    # limit of 48 (about 28 fit; docs/languages.md).
    verdict = judge(tier, THREADS, "20\n", "20\n")
    assert verdict.status is VerdictStatus.passed, verdict.feedback


def test_thread_bomb_is_stopped_by_the_process_limit(tier: SandboxTier) -> None:
    verdict = judge(tier, THREAD_BOMB, "", "", case_timeout_s=2.0, timeout_s=5.0)
    assert verdict.status is VerdictStatus.failed, verdict.feedback
    assert verdict.reason == "pids_limit", verdict.feedback
