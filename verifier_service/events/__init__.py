"""Job events: what trainers learn of finished and revised rewards (SSE, changes feed, webhooks)."""
