"""Escalation policies: documents, CEL gates, parsing; storage and API live beside them."""
