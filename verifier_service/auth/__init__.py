"""Identity and access: principals, API keys, people's sign-in, roles, rate limits, audit."""
