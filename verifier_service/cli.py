"""The `verifier-service` command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from verifier_service.auth import cli as auth_cli
from verifier_service.cli_database import require_database
from verifier_service.settings import Settings, get_settings

app = typer.Typer(
    help="verifier-service: cost-aware multi-tier rewards for RL.", no_args_is_help=True
)
policies_app = typer.Typer(help="Escalation policies.", no_args_is_help=True)
app.add_typer(policies_app, name="policies")
console = Console(stderr=True, soft_wrap=True)

ALL_QUEUES = "ladder,tier.fast,tier.sim,tier.hifi,tier.sandbox,tier.judge,review,callbacks"


def _mount_optional(module: str, attr: str, name: str) -> None:
    # Tier families that ship their own commands mount them here when they are installed.
    try:
        sub = getattr(__import__(module, fromlist=[attr]), attr)
    except ImportError:
        return
    app.add_typer(sub, name=name)


_mount_optional("verifier_service.sandbox.cli", "sandbox_app", "sandbox")
_mount_optional("verifier_service.chem.cli", "chem_app", "chem")
auth_cli.mount(app)


def _mount_train() -> None:
    # The GRPO trainer's heavy imports (torch, TRL) happen inside the command.
    from trainer.cli import train

    app.command("train")(train)


_mount_train()


def _seed_policies() -> list[str]:
    from verifier_service.core.db import transaction
    from verifier_service.policies.loader import EXAMPLES_DIR
    from verifier_service.policies.service import InvalidPolicyError, load_folder
    from verifier_service.wiring import configure_tiers

    if not EXAMPLES_DIR.is_dir():
        return []
    configure_tiers()  # tiers check configs against their settings (judge endpoints)

    def report(path: Path, exc: InvalidPolicyError) -> None:
        problems = "; ".join(f"{e['loc']}: {e['msg']}" for e in exc.extra.get("errors", []))
        console.print(f"[yellow]skipped example policy {path.name}[/]: {problems}")

    with transaction() as session:
        return load_folder(session, EXAMPLES_DIR, only_missing=True, on_error=report)


@app.command()
def migrate(
    seed: Annotated[bool, typer.Option(help="Load the example policies that are missing.")] = True,
) -> None:
    """Upgrade the database schema to the latest revision."""
    from verifier_service.core.logging import mask_secrets
    from verifier_service.core.migrate import upgrade

    settings = get_settings()
    upgrade(settings.database_url)
    console.print(f"[green]database at head[/]: {mask_secrets(settings.database_url)}")
    if seed:
        for name in _seed_policies():
            console.print(f"loaded policy [bold]{name}[/]")


@app.command()
def api(
    host: Annotated[str | None, typer.Option(help="Interface to bind.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
    workers: Annotated[int, typer.Option(help="Uvicorn worker processes.")] = 1,
) -> None:
    """Serve the HTTP API (refuses to start on an un-migrated database or without auth set up)."""
    import uvicorn

    from verifier_service.core.db import get_engine
    from verifier_service.core.errors import DatabaseNotMigratedError
    from verifier_service.core.migrate import ensure_migrated

    settings = get_settings()
    try:
        ensure_migrated(get_engine())
    except DatabaseNotMigratedError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None
    if not settings.auth.local_admin or (host or settings.api.host) != "127.0.0.1":
        auth_cli.require_api_auth()
    uvicorn.run(
        "verifier_service.app:create_app",
        factory=True,
        host=host or settings.api.host,
        port=port or settings.api.port,
        workers=workers,
        log_level=settings.log_level.lower(),
    )


@app.command()
def worker(
    queues: Annotated[str, typer.Option(help="Comma-separated queues to consume.")] = ALL_QUEUES,
    concurrency: Annotated[int | None, typer.Option(help="Processes.")] = None,
    name: Annotated[
        str | None,
        typer.Option(
            help="Worker node name, unique among all hosts (default: worker-<random>@%h)."
        ),
    ] = None,
) -> None:
    """Run a Celery worker for some queues."""
    from verifier_service.oracle.service import oracle_queues
    from workers.celery_app import app as celery_app

    settings = get_settings()
    wanted = [q.strip() for q in queues.split(",") if q.strip()]
    wanted = oracle_queues(wanted, settings.oracles.definitions)
    if "tier.sandbox" in wanted:
        try:
            from tiers.code.sandbox import startup_check
        except ImportError:
            pass
        else:
            try:
                startup_check(settings.sandbox)
            except Exception as exc:
                console.print(f"[red]sandbox worker cannot start:[/] {exc}")
                raise typer.Exit(2) from None
    argv = [
        "worker",
        f"--queues={','.join(wanted)}",
        f"--concurrency={concurrency or settings.worker.concurrency}",
        f"--loglevel={settings.log_level}",
        "--without-gossip",
        "--without-mingle",
    ]
    # Presence and the recovery sweep tell workers apart by node name. Celery's default
    # (celery@<hostname>) is shared by two workers on one host, by hosts cloned from one image
    # and by network namespaces: one worker's heartbeat would keep a dead one "alive", and its
    # tasks would never be sent again.
    argv.append(f"--hostname={name or f'worker-{uuid.uuid4().hex[:8]}@%h'}")
    _warn_if_single_machine(settings)
    _warn_missing_extras(set(wanted))
    celery_app.worker_main(argv)


def _warn_missing_extras(queues: set[str]) -> None:
    # A step of an active policy that this host cannot run (an extra not installed) would end
    # every item climbing to it with an error verdict: say so now, naming policy and extra.
    from verifier_service.core.db import transaction
    from verifier_service.policies.requirements import missing_extras
    from verifier_service.wiring import configure_tiers

    try:
        configure_tiers()
        with transaction() as session:
            lines = missing_extras(session, queues)
    except Exception as exc:  # no schema yet, database away: the worker says so when it works
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        console.print(f"[yellow]warning:[/] policies not checked for missing extras: {reason}")
        return
    for line in lines:
        console.print(f"[yellow]warning:[/] {line}")


def _warn_if_single_machine(settings: Settings) -> None:
    # The default database is a SQLite file of this machine: a worker on another machine that
    # falls back to it sees none of the API's jobs.
    if settings.database.url is None and not settings.broker_url.startswith("redis+socket://"):
        console.print(
            f"[yellow]warning:[/] the database is the SQLite file {settings.database_url} of "
            "this machine: workers on other hosts will not see its jobs (set "
            "VERIFIER_DATABASE__URL to a PostgreSQL URL on every host)"
        )


def _dev_webhook_env(settings: Settings) -> dict[str, str]:
    """`dev` signs webhooks with a secret kept in the data directory and lets them reach this
    machine (loopback and private addresses), unless the environment says otherwise."""
    import base64
    import secrets

    secret_file = Path(settings.data_dir) / "webhook-secret"
    if not secret_file.exists():
        secret_file.parent.mkdir(parents=True, exist_ok=True)
        secret_file.write_text("whsec_" + base64.b64encode(secrets.token_bytes(32)).decode())
        secret_file.chmod(0o600)
    env = {}
    if "VERIFIER_WEBHOOKS__ALLOW_PRIVATE" not in os.environ:
        env["VERIFIER_WEBHOOKS__ALLOW_PRIVATE"] = "true"
    if settings.webhooks.secret is None:
        env["VERIFIER_WEBHOOKS__SECRET"] = secret_file.read_text().strip()
    return env


def _sweep_sandbox_containers() -> None:
    """Remove sandbox containers whose process on this host is gone: those of a dev (or its API)
    that was killed before it could remove its own, and, after a stop, any its children left."""
    from tiers.code.engine import make_client, remove_stale_containers

    try:
        client = make_client(get_settings().sandbox)
        try:
            removed = remove_stale_containers(client)
        finally:
            client.close()
    except Exception as exc:  # no engine: nothing of ours can be running in it
        console.print(f"[yellow]could not sweep sandbox containers: {exc}[/]")
        return
    if removed:
        console.print(f"removed {removed} sandbox containers left by stopped processes")


def _docker_available() -> bool:
    try:
        import docker

        docker.from_env(timeout=2).ping()
        return True
    except Exception:
        return False


@app.command()
def dev(
    port: Annotated[int, typer.Option(help="API port.")] = 8000,
    sandbox: Annotated[
        bool | None,
        typer.Option(help="Start the sandbox worker (default: when a Docker engine answers)."),
    ] = None,
    auth: Annotated[
        bool, typer.Option("--auth", help="Require keys (created and printed on first start).")
    ] = False,
) -> None:
    """Everything in one command: embedded Redis, SQLite, the API and a worker per queue family."""
    from verifier_service.core.embedded import EmbeddedRedis, die_with_parent
    from verifier_service.metrics.registry import wipe as wipe_metrics

    settings = get_settings()
    env = dict(os.environ)
    redis_server: EmbeddedRedis | None = None
    if not settings.broker.url:
        redis_server = EmbeddedRedis(settings.data_dir)
        socket = redis_server.start()
        env["VERIFIER_BROKER__URL"] = f"redis+socket://{socket}"
        console.print(f"embedded Redis on [bold]{socket}[/]")
    env["VERIFIER_DATA_DIR"] = str(settings.data_dir.absolute())
    env.setdefault("OMP_NUM_THREADS", "1")
    wipe_metrics(settings.metrics_dir)  # this host's processes all start here: counts from 0
    exe = [sys.executable, "-m", "verifier_service"]
    subprocess.run([*exe, "migrate"], env=env, check=True)
    env.update(auth_cli.dev_auth_env(settings, enabled=auth))
    env.update(_dev_webhook_env(settings))
    families = {
        "fast": "ladder,tier.fast,callbacks,review",
        "sim": "tier.sim",
        "hifi": "tier.hifi",
    }
    docker_here = _docker_available()
    if docker_here:  # the containers of an earlier dev that was killed (labelled with its pids)
        _sweep_sandbox_containers()
    if sandbox is None:
        sandbox = docker_here
    if sandbox:
        families["sandbox"] = "tier.sandbox"
    else:
        console.print("[yellow]no Docker engine: the code.sandbox tier's queue has no worker[/]")
    if settings.judge.endpoints:  # judging is I/O: one process holds many calls open
        families["judge"] = "tier.judge"
    children: list[subprocess.Popen[bytes]] = []
    # If dev itself is killed (SIGKILL, OOM), the kernel kills its children too, as it does the
    # embedded Redis (see EmbeddedRedis): no graceful stop, since a worker's warm shutdown can
    # wait on a broker that is gone and an API on a client waiting 300 s, and the embedded
    # broker's queued work is gone with it anyway. Celery's pool processes follow their worker.
    orphan_guard = die_with_parent(signal.SIGKILL)
    for family, queues in families.items():
        # A name of its own per start: a restarted dev's workers are not taken for the dead ones.
        name = f"{family}-{uuid.uuid4().hex[:6]}@%h"
        cmd = [*exe, "worker", "--queues", queues, "--name", name]
        if family != "fast":
            cmd += ["--concurrency", "1"]
        child_env = env
        if family == "sandbox":
            # A development machine keeps 8 warm sandbox containers unless told otherwise.
            child_env = {"VERIFIER_SANDBOX__POOL_SIZE": "8", **env}
        children.append(subprocess.Popen(cmd, env=child_env, preexec_fn=orphan_guard))
    api = [*exe, "api", "--host", "127.0.0.1", "--port", str(port)]  # loopback only
    children.append(subprocess.Popen(api, env=env, preexec_fn=orphan_guard))
    console.print(f"[green]verifier-service[/] on http://127.0.0.1:{port} (Ctrl-C stops)")

    stopping = False

    def _stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)  # a closed terminal stops dev like Ctrl-C
    try:
        while not stopping:
            if any(c.poll() is not None for c in children):
                console.print("[red]a child process exited; shutting down[/]")
                break
            time.sleep(0.3)
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
        if redis_server is not None:
            redis_server.stop()
        if docker_here:  # what a child killed past its grace could not remove
            _sweep_sandbox_containers()
        console.print("stopped")


@policies_app.command("load")
def policies_load(
    folder: Annotated[Path, typer.Argument(help="Folder of *.yaml / *.json policies.")],
) -> None:
    """Validate and store every policy file in a folder (each becomes a new active version)."""
    require_database()
    from verifier_service.core.db import transaction
    from verifier_service.core.errors import DomainError
    from verifier_service.policies.service import load_folder
    from verifier_service.wiring import configure_tiers

    configure_tiers()
    try:
        with transaction() as session:
            names = load_folder(session, folder)
    except DomainError as exc:
        console.print(f"[red]error:[/] {exc.message}")
        for error in exc.extra.get("errors", []):
            console.print(f"  {error['loc']}: {error['msg']}")
        raise typer.Exit(2) from None
    for name in names:
        console.print(f"loaded policy [bold]{name}[/]")


@policies_app.command("list")
def policies_list() -> None:
    """Show the stored policies and their active versions."""
    require_database()
    from verifier_service.core.db import transaction
    from verifier_service.policies import repository

    with transaction() as session:
        for policy in repository.list_policies(session):
            versions = [v.version for v in repository.list_versions(session, policy.name)]
            typer.echo(f"{policy.name}\tactive={policy.active_version}\tversions={versions}")


if __name__ == "__main__":
    app()
