"""The `verifier-service` command: the server's CLI, or a clear word when only the client is in."""

from __future__ import annotations

import sys


def main() -> None:
    """Run the server's CLI; on a client-only install, say which extra the commands need."""
    try:
        from verifier_service.cli import app
    except ModuleNotFoundError as missing:
        sys.stderr.write(
            f"verifier-service: the server's commands need the `server` extra ({missing.name} "
            "is not installed): pip install 'verifier-service[server]'. This install is the "
            "client alone (from verifier_service.client import VerifierClient).\n"
        )
        raise SystemExit(2) from None
    app()
