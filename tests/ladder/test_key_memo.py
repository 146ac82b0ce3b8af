"""Verdict-cache keys come out the same whatever the per-process key memo holds: full, evicting
at its bound (`VERIFIER_CACHE_KEY_MEMO`), or turned off."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tiers.base import Candidate
from tiers.registry import get_tier
from verifier_service.ladder import execute
from verifier_service.ladder.execute import item_cache_key, keyed_candidate, sent_keys, tier_run
from verifier_service.ladder.models import Item
from verifier_service.settings import get_settings

SMILES = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "OCC(O)CO"]


@pytest.fixture
def memo(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[None]:
    monkeypatch.setenv("VERIFIER_CACHE_KEY_MEMO", str(request.param))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _item(smiles: str, metadata: dict[str, str] | None = None) -> Item:
    payload = {"kind": "molecule", "payload": {"smiles": smiles}, "metadata": metadata}
    return Item(id=smiles, candidate=payload)


@pytest.mark.parametrize("memo", [0, 2, 65536], indirect=True)
def test_keys_match_a_fresh_derivation(memo: None) -> None:
    config: dict[str, object] = {"max_heavy_atoms": 60}
    expected = {s: keyed_candidate("chem.fast", config, _item(s))[0] for s in SMILES}
    for _ in range(3):  # the memo fills, evicts (bound 2) and answers from what it kept
        for smiles in SMILES:
            assert item_cache_key("chem.fast", config, _item(smiles)) == expected[smiles]
    # Metadata plays no part in a verdict, so none in its key; the config does.
    assert item_cache_key("chem.fast", config, _item("CCO", {"group": "g"})) == expected["CCO"]
    assert item_cache_key("chem.fast", {}, _item("CCO")) != expected["CCO"]


def test_a_tier_run_takes_the_keys_its_sender_derived() -> None:
    # A tier task gets each item's key from the pass that sent it (Dispatch.keys) and parses
    # only the items it was not given a key for.
    items = [_item("CCO"), _item("OCC(O)CO")]
    given = {"CCO": "k" * 64}
    run = tier_run("job", "chem.fast", "molecule", 0, {}, items, given)
    assert run.keys["CCO"] == "k" * 64
    assert run.keys["OCC(O)CO"] == keyed_candidate("chem.fast", {}, items[1])[0]
    assert set(run.candidates) == {"k" * 64, run.keys["OCC(O)CO"]}


def test_a_task_takes_its_senders_keys_only_under_the_same_tier_version() -> None:
    version = get_tier("chem.fast").version
    ids, keys = ["a", "b"], ["k1", "k2"]
    assert sent_keys("chem.fast", ids, keys, version) == {"a": "k1", "b": "k2"}
    # A sender on another version of the tier, a resend without keys, or keys that do not
    # match the items: the task keys its items itself.
    assert sent_keys("chem.fast", ids, keys, version + "-other") is None
    assert sent_keys("chem.fast", ids, None, None) is None
    assert sent_keys("chem.fast", ids, ["k1"], version) is None


def _tool_call(n: int) -> Item:
    payload = {
        "kind": "json",
        "payload": {"tool": "search", "args": {"q": n}},
        "reference": {"schema": {"type": "object", "required": ["tool", "args"]}},
    }
    return Item(id=f"call-{n}", candidate=payload)


@pytest.mark.parametrize("memo", [64], indirect=True)
def test_one_off_tool_calls_leave_the_memo_to_molecules(
    memo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A trainer's tool calls are nearly all new, and their keys are as cheap to derive as to
    # look up: a process keying thousands of them keeps no memory for them, and the molecules
    # it parsed before are still answered without a new parse.
    monkeypatch.setattr(execute, "_MEMO", execute._KeyMemo())
    config: dict[str, object] = {}
    expected = {s: item_cache_key("chem.fast", config, _item(s)) for s in SMILES}
    calls = [_tool_call(n) for n in range(1000)]
    keys = {item_cache_key("schema", {}, call) for call in calls}
    assert keys == {keyed_candidate("schema", {}, call)[0] for call in calls}
    assert len(keys) == len(calls)
    assert len(execute._MEMO) == len(SMILES)

    parses = 0
    chem_fast = type(get_tier("chem.fast"))
    derive = chem_fast.canonical_payload

    def counted(self: Any, item: Candidate) -> str:
        nonlocal parses
        parses += 1
        return derive(self, item)

    monkeypatch.setattr(chem_fast, "canonical_payload", counted)
    assert {s: item_cache_key("chem.fast", config, _item(s)) for s in SMILES} == expected
    assert parses == 0
