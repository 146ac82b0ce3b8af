"""Supervised warm start on SMILES, so GRPO starts from a policy that writes molecules."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from workers.grpo.config import WarmStartConfig


def default_smiles_file() -> Path:
    from rdkit import RDConfig

    return Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"


def load_smiles(config: WarmStartConfig, max_chars: int) -> list[str]:
    """Canonical SMILES of the file's parsable molecules, each at most max_chars long."""
    from rdkit import Chem, rdBase

    path = config.smiles_file or default_smiles_file()
    out: list[str] = []
    with rdBase.BlockLogs():
        for line in path.read_text().splitlines():
            fields = line.split()
            mol = Chem.MolFromSmiles(fields[0]) if fields else None
            if mol is None:
                continue
            smiles = Chem.MolToSmiles(mol)
            if len(smiles) <= max_chars:
                out.append(smiles)
    if config.max_molecules is not None:
        out = out[: config.max_molecules]
    if not out:
        raise ValueError(f"no usable SMILES in {path}")
    return out


def warm_start(
    model: Any, tokenizer: Any, config: WarmStartConfig, prompt: str, seed: int
) -> float:
    """Next-character training on `prompt + SMILES + eos`; returns the last epoch's mean loss."""
    import torch
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    max_chars = model.config.n_positions - len(tokenizer.tokenize(prompt)) - 1
    smiles = load_smiles(config, max_chars)
    texts = [f"{prompt}{s}{tokenizer.eos_token}" for s in smiles]
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    steps_per_epoch = (len(texts) + config.batch_size - 1) // config.batch_size
    total = steps_per_epoch * config.epochs
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=config.learning_rate, total_steps=total, pct_start=0.1
    )
    model.train()
    mean_loss = float("nan")
    with tqdm(total=total, desc="warm start", unit="batch") as bar:
        for epoch in range(config.epochs):
            rng.shuffle(texts)
            losses: list[float] = []
            for start in range(0, len(texts), config.batch_size):
                batch = tokenizer(
                    texts[start : start + config.batch_size],
                    padding=True,
                    padding_side="right",
                    add_special_tokens=False,
                    return_tensors="pt",
                )
                labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
                loss = model(**batch, labels=labels).loss
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                schedule.step()
                losses.append(loss.item())
                bar.update(1)
                bar.set_postfix(epoch=epoch + 1, loss=f"{losses[-1]:.3f}")
            mean_loss = sum(losses) / len(losses)
    model.eval()
    return mean_loss
