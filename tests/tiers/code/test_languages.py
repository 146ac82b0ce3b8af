"""Other languages than Python in the code.sandbox tier, on the real engine and images.

Per language: a correct and a wrong program against stdin/stdout cases, a program that does not
compile, one that never ends, one that eats memory, an assert-style main; for the compiled ones a
fork bomb and a network probe. The images must be built (`verifier-service sandbox build-image
--language X`, as .ci/test does); a missing one fails the test with that command.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from language_programs import ALL, Programs

from tiers.base import Candidate, Verdict, VerdictStatus
from tiers.code import sandbox_languages
from tiers.code.languages import get_language
from tiers.code.sandbox import SandboxTier
from tiers.code.sandbox_languages import language_built, shutdown_language_pools
from tiers.code.settings import SandboxSettings

CASES = [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "40 2\n", "stdout": "42\n"}]
COMPILED = sorted(lang for lang in ALL if get_language(lang).compiled)


@pytest.fixture(scope="module")
def tier(sandbox_settings: SandboxSettings) -> Iterator[SandboxTier]:
    settings = sandbox_settings.model_copy(update={"language_pool_size": 1})
    yield SandboxTier(settings)
    shutdown_language_pools()


def judge(tier: SandboxTier, programs: Programs, code: str, **payload: Any) -> Verdict:
    if not language_built(get_language(programs.language), tier.settings):
        pytest.fail(
            f"the sandbox image of {programs.language} is not built: run "
            f"`verifier-service sandbox build-image --language {programs.language}`",
            pytrace=False,
        )
    # rustc and javac at load average 10+ on 2 cores can take longer than their default
    # compile limit (20 s); the compile limit is not what these tests are about.
    body: dict[str, Any] = {
        "language": programs.language,
        "code": code,
        "compile_timeout_s": 60.0,
        **payload,
    }
    if "tests" not in body:
        body.setdefault("cases", CASES)
    return tier.verify_batch([Candidate(kind="code", payload=body)], {})[0]


LANGS = sorted(ALL)


@pytest.mark.parametrize("lang", LANGS)
def test_correct_program_passes_its_cases(tier: SandboxTier, lang: str) -> None:
    verdict = judge(tier, ALL[lang], ALL[lang].sum)
    assert verdict.status is VerdictStatus.passed, verdict.feedback
    assert verdict.score == 1.0
    assert verdict.components["tests_total"] == 2


@pytest.mark.parametrize("lang", LANGS)
def test_wrong_program_fails_with_a_diff(tier: SandboxTier, lang: str) -> None:
    verdict = judge(tier, ALL[lang], ALL[lang].wrong)
    assert verdict.status is VerdictStatus.failed, verdict.feedback
    assert verdict.score == 0.0
    assert "wrong answer" in verdict.feedback
    assert "-1" in verdict.feedback  # what it printed for 1 2


@pytest.mark.parametrize("lang", LANGS)
def test_program_that_does_not_compile_is_a_scored_failure(tier: SandboxTier, lang: str) -> None:
    verdict = judge(tier, ALL[lang], ALL[lang].compile_error)
    assert verdict.status is VerdictStatus.failed, verdict.feedback
    assert verdict.score == 0.0
    if lang in COMPILED:
        assert verdict.reason == "compile_error", verdict.feedback
        assert "error" in verdict.feedback  # the compiler's own message
        assert get_language(lang).source in verdict.feedback  # ... naming the source file


@pytest.mark.parametrize("lang", LANGS)
def test_program_that_never_ends_fails_on_its_case_limit(tier: SandboxTier, lang: str) -> None:
    verdict = judge(tier, ALL[lang], ALL[lang].timeout, case_timeout_s=1.0)
    assert verdict.status is VerdictStatus.failed, verdict.feedback
    assert verdict.score == 0.0
    assert "time limit 1 s exceeded" in verdict.feedback


@pytest.mark.parametrize("lang", LANGS)
def test_memory_hog_fails(tier: SandboxTier, lang: str) -> None:
    verdict = judge(tier, ALL[lang], ALL[lang].hog, memory_mb=128)
    assert verdict.status is VerdictStatus.failed, verdict.feedback
    assert verdict.score == 0.0
    assert "survived" not in verdict.feedback


@pytest.mark.parametrize("lang", LANGS)
def test_assert_style_main_decides_the_score(tier: SandboxTier, lang: str) -> None:
    programs = ALL[lang]
    good = judge(tier, programs, programs.add, tests=programs.add_tests)
    assert good.status is VerdictStatus.passed, good.feedback
    assert good.score == 1.0
    bad = judge(tier, programs, programs.add_wrong, tests=programs.add_tests)
    assert bad.status is VerdictStatus.failed, bad.feedback
    assert bad.score == 0.0


@pytest.mark.parametrize("lang", COMPILED)
def test_fork_bomb_is_stopped_by_the_process_limit(tier: SandboxTier, lang: str) -> None:
    bomb = ALL[lang].fork_bomb
    assert bomb is not None
    verdict = judge(tier, ALL[lang], bomb, case_timeout_s=1.0, timeout_s=3.0)
    assert verdict.status is VerdictStatus.failed, verdict.feedback
    assert verdict.reason == "pids_limit", verdict.feedback


@pytest.mark.parametrize("lang", sorted(ALL))
def test_program_finds_no_network(tier: SandboxTier, lang: str) -> None:
    probe = ALL[lang].network
    assert probe is not None
    verdict = judge(tier, ALL[lang], probe, cases=[{"stdin": "", "stdout": "connected"}])
    assert verdict.status is VerdictStatus.failed, verdict.feedback
    assert "+blocked" in verdict.feedback  # the diff: it printed blocked, not connected


def test_unknown_language_is_refused_with_the_supported_ones(tier: SandboxTier) -> None:
    verdict = tier.verify_batch(
        [Candidate(kind="code", payload={"language": "cobol", "code": "x", "tests": "x"})], {}
    )[0]
    assert verdict.status is VerdictStatus.failed
    assert verdict.reason == "unsupported_language"
    assert "cpp" in verdict.feedback
    assert "rust" in verdict.feedback


def test_language_without_an_image_is_an_error_naming_the_build_command(
    sandbox_settings: SandboxSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Java image as a tag that was never built: the engine does not have it.
    monkeypatch.setattr(
        sandbox_languages, "image_for_family", lambda family: f"verifier-sandbox-{family}:never"
    )
    tier = SandboxTier(sandbox_settings.model_copy(update={"language_image_check_s": 0.0}))
    payload = {"language": "java", "code": "x", "cases": CASES}
    verdict = tier.verify_batch([Candidate(kind="code", payload=payload)], {})[0]
    assert verdict.status is VerdictStatus.error
    assert verdict.reason == "image_missing"
    assert "verifier-service sandbox build-image --language java" in verdict.feedback
