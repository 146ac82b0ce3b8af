"""verifier-service: a cost-aware, multi-tier reward service for RL of LLM agents."""

__version__ = "0.1.0"
