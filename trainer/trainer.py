"""A GRPO run: warm start, then TRL's GRPOTrainer scoring its generations with the service."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from math import nan
from pathlib import Path
from typing import Any

from rich.console import Console

from trainer import arithmetic
from trainer.config import TrainConfig
from trainer.model import build_model
from trainer.plotting import plot_reward_curve, read_metrics
from trainer.revisions import RevisionLog, revisions_callback
from trainer.warmstart import load_smiles, sample_validity, warm_start
from verifier_service.client import VerifierClient
from verifier_service.client.mappings import ItemMapping, SmilesMapping, TextMapping
from verifier_service.client.trl import AsyncTRLReward, TRLReward

console = Console(stderr=True)

REWARD_NAME = "verifier"
REWARD_KEY = f"rewards/{REWARD_NAME}/mean"
VALIDITY_KEY = "rewards/molecule_validity/mean"
ACCURACY_KEY = "rewards/arithmetic_accuracy/mean"
EVAL_ACCURACY_KEY = "eval/accuracy"
LEDGER_PREFIX = f"{REWARD_NAME}/ledger/"
FIDELITY_PREFIX = f"{REWARD_NAME}/fidelity/"
WARM_VALIDITY_KEY = "warm_start/valid"


def molecule_validity(completions: list[Any], **columns: Any) -> list[float]:
    """1.0 when the whole completion is a SMILES that RDKit parses and sanitizes, else 0.0.

    It is a reward function of weight 0: it changes no advantage, and TRL logs it beside the
    service's reward. The fraction of distinct molecules goes to the logs as well.
    """
    from rdkit import Chem, rdBase

    texts = [c if isinstance(c, str) else str(c[-1]["content"]) for c in completions]
    with rdBase.BlockLogs():
        mols = [Chem.MolFromSmiles(t.strip()) if t.strip() else None for t in texts]
    valid = [m is not None and m.GetNumAtoms() > 0 for m in mols]
    log_metric = columns.get("log_metric")
    if log_metric is not None:
        canonical = {Chem.MolToSmiles(m) for m, ok in zip(mols, valid, strict=True) if ok}
        log_metric("molecules/unique_valid_frac", len(canonical) / max(len(texts), 1))
    return [float(v) for v in valid]


def _metrics_callback(path: Path, started: float, max_wall_s: float | None) -> Any:
    from transformers import TrainerCallback

    class MetricsJsonl(TrainerCallback):
        """Appends each log line to a JSONL file (step, wall time); keeps the time budget."""

        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:  # noqa: ARG002
            logs = kwargs.get("logs")
            if not logs or not state.is_world_process_zero:
                return
            row = {"step": state.global_step, "elapsed_s": round(time.time() - started, 2)}
            row.update({k: v for k, v in logs.items() if isinstance(v, int | float | str)})
            with path.open("a") as f:
                f.write(json.dumps(row) + "\n")

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:  # noqa: ARG002
            # The budget is wall time since the run started, warm start included.
            if max_wall_s is not None and time.time() - started > max_wall_s:
                control.should_training_stop = True

    return MetricsJsonl()


@dataclass
class RunSummary:
    """What a run achieved: reward and validity at the start and the end, and where outputs are."""

    steps: int
    start_reward: float
    end_reward: float
    start_validity: float
    end_validity: float
    warm_validity: float
    metrics: Path
    plot: Path
    model_dir: Path
    end_eval: float = float("nan")  # arithmetic: held-out accuracy after GRPO


def _window_mean(rows: list[dict[str, Any]], key: str, first: bool, k: int) -> float:
    values = [float(r[key]) for r in rows if key in r]
    if not values:
        return float("nan")
    part = values[:k] if first else values[-k:]
    return sum(part) / len(part)


def summarize(
    metrics: Path,
    plot: Path,
    model_dir: Path,
    window: int = 5,
    check_key: str = VALIDITY_KEY,
    warm_key: str = WARM_VALIDITY_KEY,
) -> RunSummary:
    """`check_key`: the trainer's own zero-weight check (molecule validity, arithmetic accuracy);
    `warm_key`: the same measured on the warm start (for arithmetic, held-out accuracy)."""
    rows = read_metrics(metrics)
    steps = max((int(r["step"]) for r in rows), default=0)
    return RunSummary(
        steps=steps,
        start_reward=_window_mean(rows, REWARD_KEY, True, window),
        end_reward=_window_mean(rows, REWARD_KEY, False, window),
        start_validity=_window_mean(rows, check_key, True, window),
        end_validity=_window_mean(rows, check_key, False, window),
        warm_validity=_window_mean(rows, warm_key, True, 1),
        metrics=metrics,
        plot=plot,
        model_dir=model_dir,
        end_eval=_window_mean(rows, warm_key, False, 1) if warm_key != WARM_VALIDITY_KEY else nan,
    )


def _prepare_service(config: TrainConfig) -> None:
    with VerifierClient(
        config.service.base_url,
        principal=config.service.principal,
        api_key=config.service.api_key,
    ) as client:
        if config.service.policy_file is not None:
            summary = client.create_policy(config.service.policy_file.read_text())
            console.print(
                f"stored policy [bold]{summary.get('name')}[/] "
                f"version {summary.get('active_version')}"
            )


def _policy_model(config: TrainConfig, out: Path) -> tuple[Any, Any, bool]:
    """(model, tokenizer, warm-started in this call)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    warm_dir = out / "warm_start"
    if (warm_dir / "config.json").exists():
        console.print(f"warm start found in {warm_dir}; loading it")
        model = AutoModelForCausalLM.from_pretrained(warm_dir)
        return model, AutoTokenizer.from_pretrained(warm_dir), False
    warm = config.warm_start.enabled and config.model.name_or_path is None
    if config.task == "arithmetic":
        corpus = arithmetic.warm_corpus(config.arithmetic, config.seed) if warm else []
    else:
        corpus = load_smiles(config.warm_start) if warm else []
    model, tokenizer = build_model(config.model, config.seed, corpus)
    if warm:
        loss = warm_start(
            model, tokenizer, config.warm_start, config.model.prompt, config.seed, corpus
        )
        console.print(f"warm start done: last epoch loss {loss:.3f}")
        model.save_pretrained(warm_dir)
        tokenizer.save_pretrained(warm_dir)
        # Loaded back from its folder: with beta > 0, TRL builds the reference model from the
        # policy's name_or_path, which an in-memory model does not have.
        model = AutoModelForCausalLM.from_pretrained(warm_dir)
    return model, tokenizer, warm


def _record_warm_validity(
    config: TrainConfig, model: Any, tokenizer: Any, max_completion: int, metrics: Path
) -> None:
    """Sample the warm-started policy as GRPO will; the share of valid SMILES, as step 0.

    Measured at the run's temperature and, when that is not 1.0, at 1.0 too (`..._t1`).
    """
    n = config.warm_start.validity_samples
    if n == 0:
        return
    row: dict[str, Any] = {"step": 0, "warm_start/temperature": config.grpo.temperature}
    temperatures = {"": config.grpo.temperature}
    if config.grpo.temperature != 1.0:
        temperatures["_t1"] = 1.0
    for suffix, temperature in temperatures.items():
        started = time.time()
        found = sample_validity(
            model,
            tokenizer,
            config.model.prompt,
            n=n,
            temperature=temperature,
            max_new_tokens=max_completion,
            seed=config.seed,
        )
        console.print(
            f"warm start: {found['valid']:.1%} of {n} samples valid at temperature "
            f"{temperature} ({time.time() - started:.1f} s)"
        )
        row.update({f"warm_start/{k}{suffix}": v for k, v in found.items()})
    (config.output_dir / "warm_start" / "validity.json").write_text(json.dumps(row, indent=2))
    with metrics.open("a") as f:
        f.write(json.dumps(row) + "\n")


def _record_eval(
    config: TrainConfig, model: Any, tokenizer: Any, max_completion: int, metrics: Path, step: int
) -> None:
    """Arithmetic: greedy answers to the held-out sums; a metrics row at `step`."""
    started = time.time()
    found = arithmetic.evaluate(
        model,
        tokenizer,
        config.arithmetic,
        prefix=config.model.prompt,
        seed=config.seed,
        max_new_tokens=max_completion,
    )
    console.print(
        f"held-out sums at step {step}: {found['accuracy']:.1%} right, {found['boxed']:.1%} "
        f"in \\boxed{{}} ({time.time() - started:.1f} s)"
    )
    row = {"step": step, **{f"eval/{k}": v for k, v in found.items()}}
    with metrics.open("a") as f:
        f.write(json.dumps(row) + "\n")


def _task(config: TrainConfig, n_prompts: int) -> tuple[dict[str, list[str]], ItemMapping, Any]:
    """(GRPO dataset columns, item mapping, the trainer's own zero-weight check)."""
    if config.task == "arithmetic":
        rows = arithmetic.grpo_rows(config.arithmetic, config.seed, n_prompts, config.model.prompt)
        return rows, TextMapping("answer"), arithmetic.arithmetic_accuracy
    return {"prompt": [config.model.prompt] * n_prompts}, SmilesMapping(), molecule_validity


def run(config: TrainConfig) -> RunSummary:
    """Warm start (once), then GRPO for `grpo.max_steps`, resuming from the last checkpoint."""
    import torch
    from datasets import Dataset
    from transformers.trainer_utils import get_last_checkpoint
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    if config.torch_threads is not None:
        torch.set_num_threads(config.torch_threads)
    started = time.time()
    out = config.output_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(config.model_dump_json(indent=2))
    _prepare_service(config)
    model, tokenizer, warmed = _policy_model(config, out)

    g = config.grpo
    if g.batch_size % g.num_generations:
        raise ValueError(
            f"grpo.batch_size={g.batch_size} is not a multiple of num_generations="
            f"{g.num_generations}"
        )
    prompts_per_step = g.batch_size // g.num_generations
    columns, mapping, check = _task(config, prompts_per_step * g.max_steps)
    dataset = Dataset.from_dict(columns)
    max_completion = g.max_completion_length
    if config.model.name_or_path is None:
        prompt_len = max(len(tokenizer.tokenize(p)) for p in set(columns["prompt"]))
        max_completion = min(max_completion, config.model.n_positions - prompt_len)
    metrics = out / "metrics.jsonl"
    if warmed and config.task == "arithmetic":
        _record_eval(config, model, tokenizer, max_completion, metrics, step=0)
    elif warmed:
        _record_warm_validity(config, model, tokenizer, max_completion, metrics)
    args = GRPOConfig(
        output_dir=str(out),
        seed=config.seed,
        max_steps=g.max_steps,
        per_device_train_batch_size=g.batch_size,
        num_generations=g.num_generations,
        learning_rate=g.learning_rate,
        beta=g.beta,
        loss_type=g.loss_type,
        max_completion_length=max_completion,
        temperature=g.temperature,
        logging_steps=g.logging_steps,
        save_steps=g.save_steps,
        save_total_limit=g.save_total_limit,
        use_cpu=g.use_cpu,
        bf16=g.bf16,
        gradient_checkpointing=g.gradient_checkpointing,
        disable_dropout=g.disable_dropout,
        reward_weights=[1.0, 0.0],
        report_to="none",
        dataloader_num_workers=0,
    )
    reward: TRLReward | AsyncTRLReward
    if config.service.use_async:
        reward = AsyncTRLReward(
            mapping,
            base_url=config.service.base_url,
            principal=config.service.principal,
            api_key=config.service.api_key,
            policy=config.service.policy,
            timeout_s=config.service.timeout_s,
            name=REWARD_NAME,
            num_generations=g.num_generations,
            cost_ledger=config.service.cost_ledger,
            deadline_s=config.service.deadline_s,
        )
    else:
        client = VerifierClient(
            config.service.base_url,
            principal=config.service.principal,
            api_key=config.service.api_key,
        )
        reward = TRLReward(
            mapping,
            client=client,
            policy=config.service.policy,
            timeout_s=config.service.timeout_s,
            name=REWARD_NAME,
            num_generations=g.num_generations,
            cost_ledger=config.service.cost_ledger,
            deadline_s=config.service.deadline_s,
        )
    max_wall = g.max_wall_minutes * 60 if g.max_wall_minutes is not None else None
    reward_funcs: list[Any] = [reward, check]
    callbacks = [_metrics_callback(metrics, started, max_wall)]
    if config.service.revisions:  # before the metrics file: it adds to the same log line
        feed = VerifierClient(config.service.base_url, principal=config.service.principal,
                              api_key=config.service.api_key)  # fmt: skip
        callbacks.insert(0, revisions_callback(RevisionLog(feed)))
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    last = get_last_checkpoint(str(out)) if any(out.glob("checkpoint-*")) else None
    if last:
        console.print(f"resuming from {last}")
    trainer.train(resume_from_checkpoint=last)
    model_dir = out / "final"
    trainer.save_model(str(model_dir))
    tokenizer.save_pretrained(model_dir)
    arith = config.task == "arithmetic"
    if arith:
        _record_eval(config, model, tokenizer, max_completion, metrics, trainer.state.global_step)
    plot = plot_reward_curve(
        metrics,
        out / "reward-curve.png",
        reward_key=REWARD_KEY,
        validity_key=ACCURACY_KEY if arith else VALIDITY_KEY,
        validity_label="exact \\boxed{sum} (trainer's check)" if arith else "validity",
        eval_key=EVAL_ACCURACY_KEY if arith else None,
        title=f"GRPO against policy {config.service.policy!r}",
        ledger_prefix=LEDGER_PREFIX,
        fidelity_prefix=FIDELITY_PREFIX,
    )
    if arith:
        return summarize(metrics, plot, model_dir, 5, ACCURACY_KEY, EVAL_ACCURACY_KEY)
    return summarize(metrics, plot, model_dir)
