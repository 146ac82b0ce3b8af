"""The format tier's length in a model's tokens: the tokenizer the policy names (a local
tokenizer.json, a folder, or a hub id in the local cache), loaded offline; a clear error when it
is not there; words or characters only when the policy asks for that fallback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from tiers.base import Candidate, Verdict, VerdictStatus
from tiers.text.format import FormatTier
from tiers.text.tokens import load_tokenizer

TEXT = "12+34=\\boxed{46}"  # one word, 16 characters


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    load_tokenizer.cache_clear()
    yield
    load_tokenizer.cache_clear()


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    """A word-level tokenizer that splits runs of letters/digits from runs of punctuation:
    TEXT is 8 tokens (12 + 34 =\\ boxed { 46 }), where whitespace sees one word."""
    vocab = {"[UNK]": 0, "12": 1, "+": 2, "34": 3, "=\\": 4, "boxed": 5, "{": 6, "46": 7, "}": 8}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    folder = tmp_path / "tok"
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    return folder


def fmt(text: str, **config: Any) -> Verdict:
    item = Candidate(kind="text", payload={"text": text})
    (verdict,) = FormatTier().verify_batch([item], config)
    return verdict


def length(**config: Any) -> dict[str, Any]:
    return {"checks": ["length"], "max_length": 10, "overlong_buffer": 4, **config}


def test_length_counts_the_named_tokenizers_tokens(tokenizer_dir: Path) -> None:
    # Folder and file both name it; 8 tokens is past 10 - 4: penalty (6 - 8) / 4.
    for name in (str(tokenizer_dir), str(tokenizer_dir / "tokenizer.json")):
        verdict = fmt(TEXT, **length(unit="tokens", tokenizer=name))
        assert verdict.components["length_units"] == 8.0
        assert verdict.components["length_penalty"] == pytest.approx(-0.5)
        assert verdict.components["length"] == pytest.approx(0.5)
        assert "8 tokens" in (verdict.feedback or "")
    # The same text in words and characters: other counts, other rewards.
    assert fmt(TEXT, **length(unit="words")).components["length_units"] == 1.0
    assert fmt(TEXT, **length(unit="chars")).components["length"] == 0.0  # 16 > 10


def test_a_hub_id_is_read_from_the_local_cache_only(
    tokenizer_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    snapshot = cache / "models--acme--tiny-math" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "tokenizer.json").write_bytes((tokenizer_dir / "tokenizer.json").read_bytes())
    (cache / "models--acme--tiny-math" / "refs").mkdir()
    (cache / "models--acme--tiny-math" / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    verdict = fmt(TEXT, **length(unit="tokens", tokenizer="acme/tiny-math"))
    assert verdict.components["length_units"] == 8.0
    # A hub id not in the cache is not downloaded: an error that says so.
    missing = fmt(TEXT, **length(unit="tokens", tokenizer="acme/not-cached"))
    assert missing.status is VerdictStatus.error
    assert "not in the local Hugging Face cache" in (missing.feedback or "")


def test_a_missing_tokenizer_is_an_error_never_a_count_in_another_unit(tmp_path: Path) -> None:
    name = str(tmp_path / "nowhere")
    verdict = fmt(TEXT, **length(unit="tokens", tokenizer=name))
    assert verdict.status is VerdictStatus.error
    assert verdict.reason == "tokenizer_unavailable"
    assert "length" not in verdict.components
    assert name in (verdict.feedback or "")
    # A policy naming it is refused when stored, the field and the way out in the message.
    with pytest.raises(ValueError, match=r"tokenizer: .*nowhere.*tokenizer_fallback"):
        FormatTier().validate_config(length(unit="tokens", tokenizer=name))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"no tokenizer\.json"):
        FormatTier().validate_config(length(unit="tokens", tokenizer=str(empty)))


def test_the_fallback_counts_words_or_chars_only_when_the_policy_says_so(tmp_path: Path) -> None:
    config = length(unit="tokens", tokenizer=str(tmp_path / "nowhere"), tokenizer_fallback="chars")
    FormatTier().validate_config(config)  # storable: the policy accepted the fallback
    verdict = fmt(TEXT, **config)
    assert verdict.status is VerdictStatus.failed  # 16 characters: past the limit of 10
    assert verdict.components["length_fallback"] == 1.0
    assert verdict.components["length_units"] == 16.0
    assert "counted in chars (the policy's fallback)" in (verdict.feedback or "")
    words = fmt(TEXT, **{**config, "tokenizer_fallback": "words"})
    assert words.status is VerdictStatus.passed
    assert words.components["length_units"] == 1.0


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"unit": "tokens"}, "name its `tokenizer`"),
        ({"unit": "words", "tokenizer": "x"}, "only with unit `tokens`"),
        ({"unit": "chars", "tokenizer_fallback": "words"}, "only with unit `tokens`"),
    ],
)
def test_unit_and_tokenizer_must_agree(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FormatTier().validate_config(length(**config))


def test_a_policy_naming_a_missing_tokenizer_is_refused_at_the_field(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    from verifier_service.policies.service import InvalidPolicyError, validate_document

    def policy(tokenizer: str) -> dict[str, Any]:
        step = {"checks": ["length"], "unit": "tokens", "tokenizer": tokenizer}
        return {
            "name": "tokens",
            "ladders": {"text": [{"tier": "format", "config": step}]},
            "reward": {"text": {"components": [{"name": "length", "tier": "format"}]}},
        }

    assert validate_document(policy(str(tokenizer_dir))).name == "tokens"
    with pytest.raises(InvalidPolicyError) as refused:
        validate_document(policy(str(tmp_path / "nowhere")))
    assert refused.value.status_code == 422
    (error,) = refused.value.extra["errors"]
    assert error["loc"] == "ladders.text[0].config"
    assert "nowhere" in error["msg"]
    assert "tokenizer_fallback" in error["msg"]
