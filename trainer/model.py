"""The policy model: a real causal LM by path, or a small GPT-2 built from a config."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainer.config import ModelConfig
from trainer.tokenizer import build_tokenizer


def build_model(config: ModelConfig, seed: int, corpus: Sequence[str] = ()) -> tuple[Any, Any]:
    """(model, tokenizer): loaded from `name_or_path`, or a fresh GPT-2 with a SMILES tokenizer.

    `corpus` gives the atom tokenizer its bracket atoms.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel

    if config.name_or_path is not None:
        tokenizer = AutoTokenizer.from_pretrained(config.name_or_path, padding_side="left")
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        return AutoModelForCausalLM.from_pretrained(config.name_or_path), tokenizer
    torch.manual_seed(seed)
    tokenizer = build_tokenizer(config.tokenizer, corpus)
    gpt2 = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=config.n_positions,
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return GPT2LMHeadModel(gpt2), tokenizer
