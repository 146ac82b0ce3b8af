"""TRL's real GRPOTrainer (trl==1.16.0, the `train` extra) with our reward function, live.

A one-layer GPT-2 built from a config, whose vocabulary is C, N and O: every completion it
writes is a chain molecule RDKit parses (an empty one is invalid), so the rewards differ from
completion to completion. Two GRPO steps against the `default` policy (QED of valid molecules);
what the trainer logged, per completion and per step, must be what the service stored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

import pytest

from verifier_service.client import VerifierClient
from verifier_service.client.mappings import SmilesMapping
from verifier_service.client.trl import TRLReward
from verifier_service.jobs.schemas import JobOut

PROMPT = "<bos>"
GROUP = 4
BATCH = 8
STEPS = 2


class RecordingClient(VerifierClient):
    """The real client; remembers the jobs each scoring call made."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[list[str]] = []

    def score_jobs(self, items: Sequence[Any], **kwargs: Any) -> list[JobOut]:
        jobs = super().score_jobs(items, **kwargs)
        self.calls.append([job.id for job in jobs])
        return jobs


def _qed(smiles: str) -> float:
    from rdkit import Chem
    from rdkit.Chem import QED

    mol = Chem.MolFromSmiles(smiles.strip()) if smiles.strip() else None
    return QED.qed(mol) if mol is not None else 0.0


def _tiny_policy() -> tuple[Any, Any]:
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["<pad>", "<bos>", "<eos>", "<unk>", "C", "N", "O"])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
    )
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(vocab),
        n_positions=24,
        n_embd=16,
        n_layer=1,
        n_head=2,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    return GPT2LMHeadModel(config), tokenizer


def test_trl_grpo_trainer_logs_the_services_rewards(live_service: Any, tmp_path: Any) -> None:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    assert version("trl") == "1.16.0", "docs/trainers.md names the TRL version checked"
    torch.set_num_threads(1)
    model, tokenizer = _tiny_policy()
    client = RecordingClient(
        live_service.base_url, api_key=live_service.create_key("trl-grpo", "trainer")
    )
    reward = TRLReward(SmilesMapping(), client=client, policy="default", num_generations=GROUP)
    seen: list[tuple[list[str], list[float]]] = []

    class Snapshot(TrainerCallback):  # type: ignore[misc]
        """The trainer's own per-completion log of the step just taken."""

        def on_step_end(self, *_: Any, **__: Any) -> None:
            logs = trainer._logs
            seen.append((list(logs["completion"]), list(logs["rewards"]["verifier"])))

    args = GRPOConfig(
        output_dir=str(tmp_path),
        seed=0,
        max_steps=STEPS,
        per_device_train_batch_size=BATCH,
        num_generations=GROUP,
        learning_rate=1e-3,
        max_completion_length=12,
        temperature=1.0,
        logging_steps=1,
        save_strategy="no",
        use_cpu=True,
        report_to="none",
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": [PROMPT] * (BATCH // GROUP) * STEPS}),
        processing_class=tokenizer,
        callbacks=[Snapshot()],
    )
    trainer.train()

    assert len(client.calls) == STEPS, "one scoring call per step"
    assert len(seen) == STEPS
    logged_means = [r["rewards/verifier/mean"] for r in trainer.state.log_history if "loss" in r]
    assert len(logged_means) == STEPS
    all_values: list[float] = []
    for (completions, trainer_rewards), job_ids, logged_mean in zip(
        seen, client.calls, logged_means, strict=True
    ):
        items = [item for job_id in job_ids for item in client.get_job(job_id).items]
        assert len(items) == BATCH == len(completions) == len(trainer_rewards)
        rewards = [i.reward for i in items]
        assert all(r is not None and r.status == "scored" for r in rewards)
        service = [r.value if r is not None and r.value is not None else math.nan for r in rewards]
        # TRL keeps rewards in a float32 tensor: equal to float32 precision.
        assert trainer_rewards == pytest.approx(service, rel=1e-6, abs=1e-7)
        # In the same order as the trainer's completions: the service's QED is RDKit's QED of
        # the completion the trainer logged at that place (0 for an empty, invalid one).
        for completion, r in zip(completions, rewards, strict=True):
            assert r is not None
            assert math.isclose(r.value or 0.0, _qed(completion), abs_tol=1e-6), completion
        assert math.isclose(logged_mean, sum(service) / len(service), rel_tol=1e-5)
        all_values += service
    assert len(set(all_values)) > 2, "the rewards differ between completions"
    assert max(all_values) > 0.0
