"""Model judges: `judge.llm` scores a candidate against a rubric on an OpenAI-compatible server."""
