"""Supervised warm start on SMILES, so GRPO starts from a policy that writes molecules."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from trainer.config import WarmStartConfig


def default_smiles_file() -> Path:
    from rdkit import RDConfig

    return Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"


def load_smiles(config: WarmStartConfig) -> list[str]:
    """Canonical SMILES of the file's usable molecules, after the config's filters, deduplicated.

    A molecule is used when RDKit parses it; with `largest_fragment` its salts and solvents
    are dropped; with `neutral_only` a molecule with a formal charge is skipped; and its
    canonical SMILES must be at most `max_chars` long.
    """
    from rdkit import Chem, rdBase
    from rdkit.Chem.MolStandardize import rdMolStandardize

    path = config.smiles_file or default_smiles_file()
    chooser = rdMolStandardize.LargestFragmentChooser()
    out: list[str] = []
    seen: set[str] = set()
    with rdBase.BlockLogs():
        for line in path.read_text().splitlines():
            fields = line.split()
            mol = Chem.MolFromSmiles(fields[0]) if fields else None
            if mol is None or mol.GetNumAtoms() == 0:
                continue
            if config.largest_fragment:
                mol = chooser.choose(mol)
            if config.neutral_only and any(a.GetFormalCharge() for a in mol.GetAtoms()):
                continue
            smiles = Chem.MolToSmiles(mol)
            if config.max_chars is not None and len(smiles) > config.max_chars:
                continue
            if smiles not in seen:
                seen.add(smiles)
                out.append(smiles)
    if config.max_molecules is not None:
        out = out[: config.max_molecules]
    if not out:
        raise ValueError(f"no usable SMILES in {path}")
    return out


def warm_start(
    model: Any,
    tokenizer: Any,
    config: WarmStartConfig,
    prompt: str,
    seed: int,
    smiles: list[str] | None = None,
) -> float:
    """Next-token training on `prompt + SMILES + eos`; returns the last epoch's mean loss.

    Molecules longer than the model's positions (in the tokenizer's tokens) are left out.
    """
    import torch
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    room = model.config.n_positions - len(tokenizer.tokenize(prompt)) - 1
    corpus = smiles if smiles is not None else load_smiles(config)
    texts = [
        f"{prompt}{s}{tokenizer.eos_token}" for s in corpus if len(tokenizer.tokenize(s)) <= room
    ]
    if not texts:
        raise ValueError(f"no SMILES fits in {room} tokens")
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


def sample_validity(
    model: Any,
    tokenizer: Any,
    prompt: str,
    *,
    n: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
) -> dict[str, float]:
    """Sample `n` completions as GRPO will (same prompt, temperature, length); how many parse.

    `valid`: the share RDKit parses and sanitizes as a whole; `unique_valid`: distinct valid
    molecules per sample.
    """
    import torch
    from rdkit import Chem, rdBase

    torch.manual_seed(seed)
    inputs = tokenizer([prompt] * n, add_special_tokens=False, return_tensors="pt")
    with torch.no_grad():
        output = model.generate(
            **inputs,
            do_sample=True,
            temperature=temperature,
            top_k=0,
            max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    texts = tokenizer.batch_decode(
        output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True
    )
    canonical: set[str] = set()
    valid = 0
    with rdBase.BlockLogs():
        for text in texts:
            mol = Chem.MolFromSmiles(text.strip()) if text.strip() else None
            if mol is not None and mol.GetNumAtoms() > 0:
                valid += 1
                canonical.add(Chem.MolToSmiles(mol))
    return {"valid": valid / n, "unique_valid": len(canonical) / n, "samples": float(n)}
