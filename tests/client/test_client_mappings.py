"""From completions to items: SMILES and code extraction, trajectories and per-step rewards."""

from __future__ import annotations

import pytest

from verifier_service.client.mappings import (
    CodeMapping,
    SmilesMapping,
    extract_code,
    extract_smiles,
    group_key,
    message_text,
    token_rewards,
    trajectory_item,
)
from verifier_service.ladder.schemas import Reward, RewardStatus


@pytest.mark.parametrize(
    ("text", "smiles"),
    [
        ("CCO", "CCO"),
        ("  c1ccccc1O\n", "c1ccccc1O"),
        ("The answer is <smiles>CC(=O)O</smiles>.", "CC(=O)O"),
        ("Here you go:\n```\nCC(C)Cc1ccc(cc1)C(C)C(=O)O\n```", "CC(C)Cc1ccc(cc1)C(C)C(=O)O"),
        ("My molecule: `Cn1cnc2c1c(=O)n(C)c(=O)n2C`, caffeine.", "Cn1cnc2c1c(=O)n(C)c(=O)n2C"),
        ("no molecule here at all", None),
        ("C1CC", None),
    ],
)
def test_extract_smiles_finds_the_molecule_in_free_text(text: str, smiles: str | None) -> None:
    assert extract_smiles(text) == smiles


def test_unparsable_completion_is_sent_as_is_so_the_service_scores_it_invalid() -> None:
    item = SmilesMapping()("prompt", " C1CC ", {})
    assert item == {"kind": "molecule", "payload": {"smiles": "C1CC"}}


def test_smiles_mapping_takes_reference_from_the_row() -> None:
    item = SmilesMapping(reference_column="target")("", "CCO", {"target": "CCN"})
    assert item["reference"] == {"smiles": ["CCN"]}


def test_extract_code_prefers_the_python_block() -> None:
    text = "Plan:\n```text\nnot code\n```\nCode:\n```python\ndef f():\n    return 1\n```"
    assert extract_code(text) == "def f():\n    return 1\n"
    assert extract_code("def g(): pass") == "def g(): pass"


def test_code_mapping_uses_the_row_tests() -> None:
    item = CodeMapping()("", "```py\nx = 1\n```", {"tests": "assert x == 1"})
    assert item == {
        "kind": "code",
        "payload": {"language": "python", "code": "x = 1\n", "tests": "assert x == 1"},
    }


def test_conversational_completions_use_the_last_message() -> None:
    assert message_text([{"role": "assistant", "content": "CCO"}]) == "CCO"
    assert message_text([{"role": "assistant", "content": [{"type": "text", "text": "N"}]}]) == "N"


def test_group_key_is_shared_by_completions_of_one_prompt() -> None:
    assert group_key("p", 3) == group_key("p", 3) != group_key("q", 3)
    assert group_key("p", 3) != group_key("p", 4)


def test_multi_turn_rollout_becomes_a_trajectory_with_observations() -> None:
    turns = [
        {"role": "system", "content": "You design molecules."},
        {"role": "user", "content": "Make something like aspirin."},
        {"role": "assistant", "content": "CCO"},
        {"role": "tool", "content": "too small"},
        {"role": "assistant", "content": "CC(=O)Oc1ccccc1C(=O)O"},
    ]
    item = trajectory_item(turns, SmilesMapping())
    assert item["kind"] == "trajectory"
    assert [s["action"]["payload"]["smiles"] for s in item["steps"]] == [
        "CCO",
        "CC(=O)Oc1ccccc1C(=O)O",
    ]
    assert item["steps"][0]["observation"] == "too small"
    assert "observation" not in item["steps"][1]


def test_step_rewards_land_on_the_last_token_of_each_turn() -> None:
    reward = Reward(
        value=0.6, status=RewardStatus.scored, step_rewards=[0.2, None], outcome_reward=0.9
    )
    dense = token_rewards(reward, step_ends=[3, 7], n_tokens=9, missing=-1.0)
    assert dense == [0.0, 0.0, 0.0, 0.2, 0.0, 0.0, 0.0, -1.0 + 0.9, 0.0]
    with pytest.raises(ValueError, match="2 step rewards for 1 assistant turns"):
        token_rewards(reward, step_ends=[3], n_tokens=9)


def test_special_tokens_are_stripped_from_the_ends_only() -> None:
    from verifier_service.client.mappings import strip_special_tokens

    assert strip_special_tokens("CCO<|im_end|>\n<|endoftext|>") == ("CCO", 2)
    assert strip_special_tokens("<s> print('</s>')</s>") == ("print('</s>')", 2)
    assert strip_special_tokens("CCO") == ("CCO", 0)
    assert strip_special_tokens("CCO<|x|>", ["<|x|>"]) == ("CCO", 1)


def test_the_response_is_found_after_a_bos_or_a_cut_prompt() -> None:
    from verifier_service.client.mappings import split_response

    prompt = "Suggest a better molecule than CCCCCC. Answer:"
    assert split_response(prompt + " CCO", prompt) == (" CCO", "prefix")
    assert split_response("<s>" + prompt + " CCO", prompt) == (" CCO", "inside")
    assert split_response(prompt[20:] + " CCO", prompt) == (" CCO", "cut")
    assert split_response("something else CCO", prompt) == ("something else CCO", "none")
    # The response repeating the prompt does not move the split.
    assert split_response(prompt + prompt, prompt) == (prompt, "prefix")
