"""The training run's configuration, read from a YAML file."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServiceConfig(_Section):
    """Which reward service and policy the trainer scores its molecules with."""

    base_url: str = Field(default="http://127.0.0.1:8000", description="Service root URL.")
    policy: str = Field(default="drug-likeness", description="Policy the rewards come from.")
    policy_file: Path | None = Field(
        default=None,
        description="Policy YAML to store (as a new active version) before training; relative "
        "paths are resolved against the config file's folder.",
    )
    principal: str = Field(
        default="grpo-trainer",
        description="Sent as X-Principal: honoured from an operator's key (or dev's local "
        "admin); other keys' work is recorded under their own principal.",
    )
    api_key: str | None = Field(
        default=None,
        description="API key of a trainer (`verifier-service keys create --role trainer`); "
        "default: the VERIFIER_API_KEY environment variable.",
    )
    timeout_s: float = Field(default=120.0, gt=0, description="Longest wait for one batch.")
    use_async: bool = Field(default=False, description="Use the async TRL reward function.")
    cost_ledger: bool = Field(
        default=False,
        description="After each batch read its jobs' cost ledger (GET /v1/jobs/{id}/cost) and "
        "log cost units, cache hits and the share of items that escalated, per step.",
    )
    deadline_s: float | None = Field(
        default=None,
        gt=0,
        description="Each batch's job deadline: items a lab or people have not answered by then "
        "get the policy's fallback reward now and a revision later (default: wait for all).",
    )
    revisions: bool = Field(
        default=False,
        description="After each step read the changes feed and log the rewards of earlier "
        "steps that were revised (revisions/...), e.g. by a lab's late results.",
    )


class ModelConfig(_Section):
    """A real model by path, or a small GPT-2 built from a config with a character tokenizer."""

    name_or_path: str | None = Field(
        default=None, description="A local model folder or hub id; None builds a small GPT-2."
    )
    n_layer: int = Field(default=3, ge=1)
    n_head: int = Field(default=4, ge=1)
    n_embd: int = Field(default=128, ge=8)
    n_positions: int = Field(default=128, ge=16, description="Longest sequence, in tokens.")
    tokenizer: Literal["char", "atom", "text"] = Field(
        default="char",
        description="char: one token per SMILES character; atom: one per SMILES atom (Cl, "
        "[nH], %10 are single tokens), bracket atoms taken from the warm-start corpus; text: "
        "one per printable ASCII character (the arithmetic task).",
    )
    prompt: str = Field(
        default="<bos>", description="Prompt of every generation (the BOS token for SMILES LMs)."
    )


class ArithmeticConfig(_Section):
    """The arithmetic task: `a+b=` answered as `\\boxed{a+b}`, rewarded by a text policy."""

    digits: int = Field(default=2, ge=1, le=6, description="Digits of each operand.")
    warm_questions: int = Field(
        default=2000, ge=1, description="Worked sums the warm start trains on."
    )
    eval_questions: int = Field(
        default=200,
        ge=1,
        description="Held-out sums answered greedily before and after GRPO (never trained on).",
    )


class WarmStartConfig(_Section):
    """Supervised training on SMILES before GRPO, so the policy starts out writing molecules."""

    enabled: bool = True
    smiles_file: Path | None = Field(
        default=None, description="One SMILES per line; None: RDKit's NCI/first_5K.smi."
    )
    max_molecules: int | None = Field(default=None, ge=1, description="Use at most this many.")
    largest_fragment: bool = Field(
        default=False, description="Keep each molecule's largest fragment (drop salts, solvents)."
    )
    neutral_only: bool = Field(default=False, description="Skip molecules with a formal charge.")
    max_chars: int | None = Field(
        default=None, ge=1, description="Skip molecules whose canonical SMILES is longer."
    )
    validity_samples: int = Field(
        default=256,
        ge=0,
        description="After the warm start, sample this many molecules as GRPO will and record "
        "the share RDKit parses (warm_start/validity.json); 0: skip.",
    )
    epochs: int = Field(default=6, ge=1)
    batch_size: int = Field(default=64, ge=1)
    learning_rate: float = Field(default=2e-3, gt=0)


class GRPOSection(_Section):
    """GRPO hyperparameters (passed to TRL's GRPOConfig)."""

    max_steps: int = Field(default=100, ge=1, description="Optimizer steps.")
    num_generations: int = Field(default=8, ge=2, description="Group size: completions/prompt.")
    batch_size: int = Field(
        default=32, ge=2, description="Completions per step (a multiple of num_generations)."
    )
    learning_rate: float = Field(default=1e-4, gt=0)
    beta: float = Field(default=0.0, ge=0, description="KL penalty against the start model.")
    max_completion_length: int = Field(default=100, ge=1, description="Tokens per completion.")
    temperature: float = Field(default=1.0, gt=0)
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo"] = "dapo"
    max_wall_minutes: float | None = Field(
        default=None, gt=0, description="Stop GRPO after this many minutes of the whole run."
    )
    logging_steps: int = Field(default=1, ge=1)
    save_steps: int = Field(default=50, ge=1, description="Checkpoint every this many steps.")
    save_total_limit: int = Field(default=2, ge=1)
    use_cpu: bool = Field(default=True, description="False on a GPU machine.")
    bf16: bool = Field(default=False, description="bfloat16 on a GPU that supports it.")
    gradient_checkpointing: bool = False
    disable_dropout: bool = Field(
        default=True,
        description="No dropout in the policy: with it, the KL to the reference model is noisy "
        "from step 1 (the reference runs without dropout).",
    )


class TrainConfig(_Section):
    """A whole run: service, model, warm start, GRPO and where outputs go."""

    output_dir: Path = Field(default=Path("runs/grpo"), description="Checkpoints, metrics, plot.")
    seed: int = 0
    torch_threads: int | None = Field(
        default=None,
        ge=1,
        description="torch intra-op threads; 1 keeps a tiny model fast on a busy shared CPU.",
    )
    task: Literal["molecule", "arithmetic"] = Field(
        default="molecule",
        description="molecule: SMILES scored as `molecule` items; arithmetic: sums answered "
        "in \\boxed{} and scored as `text` items against the sum.",
    )
    arithmetic: ArithmeticConfig = Field(default_factory=ArithmeticConfig)
    service: ServiceConfig = Field(default_factory=ServiceConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    warm_start: WarmStartConfig = Field(default_factory=WarmStartConfig)
    grpo: GRPOSection = Field(default_factory=GRPOSection)

    @classmethod
    def load(cls, path: Path) -> TrainConfig:
        config = cls.model_validate(yaml.safe_load(path.read_text()) or {})
        policy_file = config.service.policy_file
        if policy_file is not None and not policy_file.is_absolute():
            config.service.policy_file = (path.parent / policy_file).resolve()
        return config
