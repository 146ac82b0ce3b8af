"""The companion GRPO trainer: TRL's GRPOTrainer with the reward service as its reward function.

Needs the `train` extra (torch, trl, transformers, datasets, accelerate, matplotlib).
"""
