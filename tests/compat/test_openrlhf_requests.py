"""OpenRLHF's remote reward requests, shaped as its code builds them, against the live service.

OpenRLHF needs CUDA torch, DeepSpeed and vLLM, so it is not installed here; these requests follow
its source instead (docs/trainers.md names the versions and files): the query is the prompt +
response token ids decoded with `skip_special_tokens=False` (so it ends with the tokenizer's EOS
text, and may start with a BOS text the prompt lacks), `prompts` the prompt texts, `labels` the
labels; every request's `extra_logs` is concatenated per key across requests by its trainer.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"
# A Qwen-style chat template, as the agent executor decodes it with special tokens kept.
QWEN_PROMPT = (
    "<|im_start|>system\nYou are a chemist.<|im_end|>\n"
    "<|im_start|>user\nImprove CCCCCCCCCC (decane): answer with one SMILES.<|im_end|>\n"
    "<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def url(live_service: Any) -> str:
    """The OpenRLHF endpoint with a trainer key in its path (OpenRLHF sends no header)."""
    key = live_service.create_key("openrlhf-compat", "trainer")
    return f"{live_service.base_url}/k/{key}/v1/compat/openrlhf"


def post(url: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
    response = httpx.post(url, params={"policy": "default", **params}, json=body, timeout=60)
    assert response.status_code == 200, response.text
    out: dict[str, Any] = response.json()
    return out


@pytest.mark.parametrize("eos", ["<|im_end|>", "</s>", "<|endoftext|>", "<|im_end|><|endoftext|>"])
def test_a_molecule_followed_by_the_eos_text_is_scored(url: str, eos: str) -> None:
    out = post(url, {"query": [QWEN_PROMPT + ASPIRIN + eos], "prompts": [QWEN_PROMPT]})
    assert out["rewards"][0] > 0.4, out
    assert out["extra_logs"]["special_tokens_stripped"] == [float(eos.count("<"))]
    assert out["extra_logs"]["prompt_found"] == [1.0]


def test_a_bos_text_in_front_of_the_query_still_finds_the_response(url: str) -> None:
    prompt = "Improve CCCCCCCCCC (decane). Answer:"  # the prompt's own molecule is valid
    out = post(url, {"query": [f"<s>{prompt} not sure</s>"], "prompts": [prompt]})
    # The response has no molecule: an invalid one, 0.0; the prompt's decane must not be scored.
    assert out["rewards"] == [0.0]
    assert out["extra_logs"]["prompt_found"] == [2.0]
    assert out["extra_logs"]["response_chars"] == [float(len("not sure"))]


def test_a_prompt_cut_at_its_start_still_finds_the_response(url: str) -> None:
    cut = QWEN_PROMPT[-60:]  # the executor kept only the end of a long prompt
    out = post(
        url, {"query": [cut + "CCCCCCCCCC not this one C1CC<|im_end|>"], "prompts": [QWEN_PROMPT]}
    )
    assert out["extra_logs"]["prompt_found"] == [3.0]
    assert out["rewards"][0] > 0.0  # decane, written in the response, is scored


def test_stripping_can_be_turned_off_or_given_other_tokens(url: str) -> None:
    body = {"query": [QWEN_PROMPT + ASPIRIN + "<|custom_eos|>"], "prompts": [QWEN_PROMPT]}
    assert post(url, body)["rewards"] == [0.0]  # not a default token: an invalid SMILES
    out = post(url, body, special_token=["<|custom_eos|>"])
    assert out["rewards"][0] > 0.4
    off = post(url, {"query": [QWEN_PROMPT + ASPIRIN + "<|im_end|>"], "prompts": [QWEN_PROMPT]},
               strip_special_tokens="false")  # fmt: skip
    assert off["extra_logs"]["special_tokens_stripped"] == [0.0]


def test_every_answer_carries_the_same_keys_so_openrlhfs_merge_holds(url: str) -> None:
    # One request with only invalid molecules, one with valid ones, one not finished in time.
    answers = [
        post(url, {"query": [QWEN_PROMPT + "C1CC<|im_end|>"], "prompts": [QWEN_PROMPT]}),
        post(
            url,
            {"query": [QWEN_PROMPT + s for s in (ASPIRIN, "CCO")], "prompts": [QWEN_PROMPT] * 2},
        ),
        post(url, {"query": ["C" * 37 + "N"]}, wait_s=0),
    ]
    keys = {frozenset(a["extra_logs"]) for a in answers}
    assert len(keys) == 1, keys
    assert "qed" in next(iter(keys))
    # What OpenRLHF's trainer does: concatenate each key across samples, then check sizes.
    batch = sum(len(a["rewards"]) for a in answers)
    merged = {k: [v for a in answers for v in a["extra_logs"][k]] for k in answers[0]["extra_logs"]}
    for key, column in merged.items():
        assert len(column) == batch, f"Size of info[{key}] ({len(column)}) != batch_size ({batch})"
    assert merged["components_missing"][0] == 1.0  # the invalid molecule has no qed
    assert merged["qed"][0] == 0.0


def test_too_many_queries_get_a_hint_for_each_openrlhf_version(url: str, live_service: Any) -> None:
    del live_service  # its api.max_items is 2000
    response = httpx.post(url, json={"query": ["CCO"] * 2001}, timeout=60)
    assert response.status_code == 413
    hint = response.json()["hint"]
    assert "0.8.x" in hint
    assert "--remote_rm_url" in hint
    assert "--reward.remote_url" in hint


def test_unfenced_code_followed_by_the_eos_text_is_sent_without_it() -> None:
    from verifier_service.client.mappings import DEFAULT_SPECIAL_TOKENS
    from verifier_service.compat.openrlhf import OpenRLHFRequest, to_items

    prompt = "<|im_start|>user\nWrite add(a, b).<|im_end|>\n<|im_start|>assistant\n"
    code = "def add(a, b):\n    return a + b"
    body = OpenRLHFRequest(
        query=[prompt + code + "<|endoftext|>"], prompts=[prompt], labels=["assert add(1, 2) == 3"]
    )
    (item,), (response,) = to_items(body, "code", DEFAULT_SPECIAL_TOKENS)
    assert item["payload"]["code"] == code
    assert item["payload"]["tests"] == "assert add(1, 2) == 3"
    assert response.special_tokens_stripped == 1
