from verifier_service.cli import app

app()
