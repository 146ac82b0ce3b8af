"""The wire contract: the models of what the API answers, shared by the server and the client.

Light on purpose: pydantic and `tiers.base` only, so that a trainer's `pip install
verifier-service` (the client) imports no RDKit, Celery, FastAPI or CEL.
"""
