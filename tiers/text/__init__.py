"""Rule-based tiers for `text` items: `answer` (final answer against the reference), `format`
(shape, length, repetition) and `similarity` (string checks and text-similarity metrics)."""
