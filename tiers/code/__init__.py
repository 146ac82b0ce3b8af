"""Code tiers: candidates of kind `code`, run against their tests in a Docker sandbox."""
