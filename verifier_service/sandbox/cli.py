"""`verifier-service sandbox ...`: manage the Docker sandbox the code.sandbox tier runs in."""

from __future__ import annotations

import time
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
    language: Annotated[
        list[str] | None,
        typer.Option(
            "--language",
            help="Build the image of this language's family (c, cpp, java, nodejs, typescript, "
            "go, rust, bash, python); repeatable. Default: the Python image only.",
        ),
    ] = None,
    all_languages: Annotated[
        bool, typer.Option("--all", help="Build the image of every language family.")
    ] = False,
) -> None:
    """Build the sandbox image(s) offline from Debian packages (debootstrap + docker import)."""
    import docker.errors

    import docker
    from tiers.code.image import ImageBuildError, build_image, image_exists
    from tiers.code.languages import (
        BASE_FAMILY,
        FAMILY_LABEL,
        UnknownLanguageError,
        families,
        family_packages,
        get_language,
    )
    from tiers.code.sandbox_languages import image_for_family

    settings = get_settings().sandbox
    if all_languages:
        wanted = families()
    elif language:
        try:
            wanted = list(dict.fromkeys(get_language(name).family for name in language))
        except UnknownLanguageError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
    else:
        wanted = [BASE_FAMILY]
    if tag and wanted != [BASE_FAMILY]:
        typer.echo("error: --tag names the Python image only; per-language tags are derived "
                   "from their inputs", err=True)  # fmt: skip
        raise typer.Exit(2)
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
    for family in wanted:
        image = (tag or settings.image) if family == BASE_FAMILY else image_for_family(family)
        if if_missing and image_exists(client, image):
            typer.echo(f"{image} already exists; nothing to do")
            continue
        started = time.monotonic()
        try:
            build_image(
                client,
                image,
                mirror=mirror or settings.debian_mirror,
                log=typer.echo,
                packages=family_packages(family),
                labels={FAMILY_LABEL: family},
            )
        except ImageBuildError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
        typer.echo(f"{family}: built {image} in {time.monotonic() - started:.0f} s")


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
