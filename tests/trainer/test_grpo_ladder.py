"""The trainer against a ladder policy: group bests climb to chem.surrogate within a budget, and
each step's JSONL row carries the cost ledger's figures and the fidelity mix."""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support import Service, private_backends, start_service

from trainer.config import TrainConfig
from trainer.trainer import FIDELITY_PREFIX, LEDGER_PREFIX, REWARD_KEY, WARM_VALIDITY_KEY, run

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "trainer" / "policies" / "drug-likeness-ladder.yaml"
CONFIGS = ROOT / "trainer" / "configs"


@pytest.fixture(scope="module")
def ladder_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """API and one worker for the ladder, chem.fast and chem.surrogate queues, on a database and
    Redis of its own."""
    with private_backends("grpo-ladder") as (pg_url, broker_url):
        service = start_service(
            tmp_path_factory.mktemp("grpo-ladder"),
            "ladder,tier.fast,tier.sim",
            VERIFIER_DATABASE__URL=pg_url,
            VERIFIER_BROKER__URL=broker_url,
        )
        try:
            yield service
        finally:
            service.stop_all()


def _chains(path: Path, n: int = 300) -> Path:
    """Acyclic C/N/O molecules with a branch now and then: a corpus a tiny model learns fast."""
    rng = random.Random(0)
    lines = []
    for _ in range(n):
        atoms = rng.choices("CCCCNO", k=rng.randint(4, 9))
        if rng.random() < 0.5:
            atoms.insert(2, "(C)")
        lines.append("".join(atoms))
    path.write_text("\n".join(lines) + "\n")
    return path


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_ladder_run_logs_escalation_cost_cache_and_fidelity_per_step(
    ladder_service: Service, tmp_path: Path
) -> None:
    # The shipped policy, with a budget of one chem.surrogate call (0.1 units) per job: of a
    # step's two group bests, at most one climbs.
    policy = yaml.safe_load(POLICY.read_text())
    policy["budgets"] = {"per_job": {"chem.surrogate": 0.1}}
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump(policy))
    config = TrainConfig.model_validate(
        {
            "output_dir": str(tmp_path / "run"),
            "torch_threads": 1,
            "service": {
                "base_url": ladder_service.base_url,
                "api_key": ladder_service.api_key,
                "policy": "drug-likeness-ladder",
                "policy_file": str(policy_file),
                "cost_ledger": True,
                "timeout_s": 120,
            },
            "model": {"n_layer": 1, "n_head": 2, "n_embd": 32, "n_positions": 24,
                      "tokenizer": "atom"},
            "warm_start": {"smiles_file": str(_chains(tmp_path / "chains.smi")), "epochs": 8,
                           "batch_size": 32, "learning_rate": 1e-2, "validity_samples": 64},
            "grpo": {"max_steps": 3, "num_generations": 4, "batch_size": 8,
                     "max_completion_length": 16, "beta": 0.05, "save_steps": 10,
                     "temperature": 0.6},
        }
    )  # fmt: skip
    summary = run(config)

    rows = [json.loads(line) for line in summary.metrics.read_text().splitlines()]
    warm = [r for r in rows if WARM_VALIDITY_KEY in r]
    assert len(warm) == 1
    assert warm[0]["step"] == 0
    assert 0.2 < warm[0][WARM_VALIDITY_KEY] <= 1.0, "the warm start writes chain molecules"
    assert json.loads((config.output_dir / "warm_start" / "validity.json").read_text())

    steps = [r for r in rows if REWARD_KEY in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    escalated = 0.0
    for r in steps:
        assert r[f"{LEDGER_PREFIX}items"] == 8
        # One chem.surrogate call at most (the budget; a cache hit costs nothing, so a second
        # group best may still climb when its verdict is cached).
        share = r[f"{LEDGER_PREFIX}escalated_frac"]
        assert share <= 2 / 8, r
        assert r.get(f"{LEDGER_PREFIX}calls/chem.surrogate", 0) <= 1, r
        assert r.get(f"{LEDGER_PREFIX}escalated_frac/chem.surrogate", 0.0) == share
        fast_calls = r[f"{LEDGER_PREFIX}calls/chem.fast"]
        fast_hits = r[f"{LEDGER_PREFIX}cache_hits/chem.fast"]
        assert fast_calls + fast_hits == 8, "every item went through chem.fast once"
        assert r[f"{LEDGER_PREFIX}cache_hits"] >= fast_hits
        assert r[f"{LEDGER_PREFIX}cost_units"] <= 0.1 + 8 * 0.001 + 1e-6  # float32 in TRL
        # The fidelity mix (from the rewards) adds up, and chem.surrogate is never more than
        # the ledger's escalations.
        mix = {k: v for k, v in r.items() if k.startswith(FIDELITY_PREFIX)}
        assert abs(sum(mix.values()) - 1.0) < 1e-6, mix
        assert mix.get(f"{FIDELITY_PREFIX}chem.surrogate", 0.0) <= share + 1e-9
        assert "kl" in r, "beta > 0: TRL logs the KL to the reference (warm-start) model"
        escalated += share
    assert escalated > 0, "some group best climbed to chem.surrogate"
    _, height = _png_size(summary.plot)
    # One panel is 4.5 inches tall at 110 dpi (about 500 px); with the ledger's panel, 7.5.
    assert height > 700, "two panels: reward and validity, then the ledger's figures"


def test_ladder_config_is_valid() -> None:
    config = TrainConfig.load(CONFIGS / "cpu-drug-likeness-ladder.yaml")
    assert config.service.cost_ledger
    assert config.grpo.beta > 0, "the recorded run keeps a KL anchor"
    assert config.service.policy_file == POLICY
    assert config.model.tokenizer == "atom"
