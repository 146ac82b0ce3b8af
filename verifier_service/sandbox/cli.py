"""`verifier-service sandbox ...`: manage the Docker sandbox the code.sandbox tier runs in."""

from __future__ import annotations

from typing import Annotated

import typer

from verifier_service.settings import get_settings

sandbox_app = typer.Typer(help="Manage the Docker sandbox used by the code.sandbox tier.")


@sandbox_app.command("build-image")
def build_image_command(
    tag: Annotated[
        str | None, typer.Option(help="Image tag; default: the sandbox.image setting.")
    ] = None,
    if_missing: Annotated[
        bool, typer.Option("--if-missing", help="Do nothing when the image already exists.")
    ] = False,
    mirror: Annotated[
        str | None, typer.Option(help="Debian mirror; default: apt's configured mirror.")
    ] = None,
) -> None:
    """Build the sandbox image offline from Debian packages (debootstrap + docker import)."""
    import docker.errors

    import docker
    from tiers.code.image import ImageBuildError, build_image, image_exists

    settings = get_settings().sandbox
    tag = tag or settings.image
    try:
        client = (
            docker.DockerClient(base_url=settings.docker_url)
            if settings.docker_url
            else docker.from_env()
        )
        client.ping()
    except docker.errors.DockerException as exc:
        typer.echo(
            f"error: the Docker engine is not reachable ({exc}); start it "
            "(e.g. `bash .ci/install-docker.sh`) and try again",
            err=True,
        )
        raise typer.Exit(1) from exc
    if if_missing and image_exists(client, tag):
        typer.echo(f"{tag} already exists; nothing to do")
        return
    try:
        build_image(client, tag, mirror=mirror or settings.debian_mirror, log=typer.echo)
    except ImageBuildError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


@sandbox_app.command("check")
def check_command() -> None:
    """Check that the Docker engine answers and the sandbox image exists."""
    from tiers.code.sandbox import SandboxUnavailableError, startup_check

    try:
        startup_check(get_settings().sandbox)
    except SandboxUnavailableError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo("sandbox ready")
