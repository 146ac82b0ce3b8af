"""`verifier-service keys ...` and `users ...`, the `api` auth check and `dev`'s auth set-up."""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console

from verifier_service.auth.schemas import Role
from verifier_service.cli_database import require_database
from verifier_service.settings import Settings, get_settings

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

keys_app = typer.Typer(
    help="API keys of programs (trainers, operators' scripts).", no_args_is_help=True
)
users_app = typer.Typer(help="People who sign in on the web pages.", no_args_is_help=True)
console = Console(stderr=True, soft_wrap=True)
T = TypeVar("T")
CLI_ACTOR = "cli"


def mount(app: typer.Typer) -> None:
    """Add the `keys` and `users` command groups to the main command."""
    app.add_typer(keys_app, name="keys")
    app.add_typer(users_app, name="users")


RoleOption = Annotated[
    list[Role], typer.Option("--role", help="Role of the principal (repeat for several).")
]


@keys_app.command("create")
def keys_create(
    role: RoleOption,
    name: Annotated[str, typer.Option(help="The principal the key acts as, e.g. team-a.")],
    expires: Annotated[
        str | None, typer.Option(help="Lifetime, e.g. 30d, 12h; default: until revoked.")
    ] = None,
    requests_per_min: Annotated[
        int | None, typer.Option(help="Own request limit (default: the role's; 0: none).")
    ] = None,
    items_per_min: Annotated[
        int | None, typer.Option(help="Own item limit (default: the role's; 0: none).")
    ] = None,
) -> None:
    """Create an API key and print it once (only its hash is stored)."""
    require_database()
    from verifier_service.auth import service
    from verifier_service.core.db import transaction
    from verifier_service.core.errors import DomainError

    try:
        lifetime = service.parse_duration(expires) if expires else None
    except ValueError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None
    try:
        with transaction() as session:
            created = service.create_key(
                session, name=name, roles=role, created_by=CLI_ACTOR, expires_in=lifetime,
                requests_per_min=requests_per_min, items_per_min=items_per_min,
            )  # fmt: skip
    except DomainError as exc:
        console.print(f"[red]error:[/] {exc.message}")
        raise typer.Exit(2) from None
    until = created.expires_at.isoformat() if created.expires_at else "until revoked"
    console.print(
        f"key {created.prefix} for [bold]{created.principal}[/] "
        f"({', '.join(created.roles)}), valid {until}. It is shown only now:"
    )
    typer.echo(created.key)


@keys_app.command("list")
def keys_list() -> None:
    """Show every key: prefix, principal, roles, state; never the keys themselves."""
    require_database()
    from verifier_service.auth import service
    from verifier_service.core.db import transaction

    with transaction() as session:
        keys = service.list_keys(session)
    for key in keys:
        expires = key.expires_at.isoformat() if key.expires_at else "-"
        typer.echo(
            f"{key.id}\t{key.prefix}\t{key.principal}\t{','.join(key.roles)}\t{key.state}"
            f"\texpires={expires}"
        )


@keys_app.command("revoke")
def keys_revoke(
    key: Annotated[str, typer.Argument(help="The key's id or prefix (vsk_...), from `keys list`.")],
) -> None:
    """Revoke a key: it stops working at once."""
    require_database()
    from verifier_service.auth import service
    from verifier_service.auth.deps import rate_limiter
    from verifier_service.core.db import transaction
    from verifier_service.core.errors import DomainError

    try:
        with transaction() as session:
            revoked, key_hash = service.revoke_key(session, key, CLI_ACTOR)
    except DomainError as exc:
        console.print(f"[red]error:[/] {exc.message}")
        raise typer.Exit(2) from None
    # After the commit: a request in between must not cache the key as still valid.
    rate_limiter(get_settings().broker_url).forget(key_hash)
    console.print(f"revoked {revoked.prefix} of [bold]{revoked.principal}[/]")


@users_app.command("create")
def users_create(
    role: RoleOption,
    name: Annotated[str, typer.Argument(help="Username, e.g. alice.")],
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input.")
    ] = False,
) -> None:
    """Create a person who signs in on the web pages (the password is prompted for)."""
    from verifier_service.auth import service

    require_database()

    password = _read_password(password_stdin, "Password")
    _in_transaction(lambda session: service.create_user(session, name, role, password, CLI_ACTOR))
    console.print(f"user [bold]{name}[/] created ({', '.join(r.value for r in role)})")


def _read_password(from_stdin: bool, prompt: str) -> str:
    """A password from standard input (one line), or typed twice at a hidden prompt."""
    if from_stdin or not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    return str(typer.prompt(prompt, hide_input=True, confirmation_prompt=True))


def _in_transaction(work: Callable[[Session], T]) -> T:
    """Run `work` in a transaction; a domain error is printed and exits with status 2."""
    from verifier_service.core.db import transaction
    from verifier_service.core.errors import DomainError

    try:
        with transaction() as session:
            return work(session)
    except DomainError as exc:
        console.print(f"[red]error:[/] {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
        raise typer.Exit(2) from None


@users_app.command("set-password")
def users_set_password(
    name: Annotated[str, typer.Argument(help="Username, e.g. alice.")],
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input.")
    ] = False,
) -> None:
    """Set a person's password (forgotten or leaked): every session of theirs ends."""
    from verifier_service.auth import service

    require_database()

    password = _read_password(password_stdin, "New password")
    ended = _in_transaction(
        lambda session: service.reset_password(session, name, password, CLI_ACTOR)
    )
    console.print(f"password of [bold]{name}[/] set; {ended} session(s) signed out")


def require_api_auth() -> None:
    """Stop `verifier-service api` unless auth is configured, saying what to do."""
    from verifier_service.auth import service
    from verifier_service.core.db import transaction

    with transaction() as session:
        problems = service.startup_problems(session, get_settings().auth)
    if problems:
        console.print("[red]error:[/] the API will not start without authentication set up:")
        for problem in problems:
            console.print(f"  - {problem}")
        console.print("For a local trial without keys, run `verifier-service dev` instead.")
        raise typer.Exit(2)


def dev_auth_env(settings: Settings, *, enabled: bool) -> dict[str, str]:
    """Environment for `dev`'s API: a session secret kept in the data directory, and either
    the local admin (no --auth) or, with --auth, keys created and printed on first start."""
    secret_file = Path(settings.data_dir) / "session-secret"
    if not secret_file.exists():
        secret_file.parent.mkdir(parents=True, exist_ok=True)
        secret_file.write_text(secrets.token_urlsafe(32))
        secret_file.chmod(0o600)
    env = {"VERIFIER_AUTH__SECRET_KEY": secret_file.read_text().strip()}
    if not enabled:
        env["VERIFIER_AUTH__LOCAL_ADMIN"] = "true"
        env["VERIFIER_AUTH__COOKIE_SECURE"] = "false"
        console.print(
            "[bold yellow]AUTH OFF:[/] requests without credentials from this machine act as "
            "[bold]local-admin[/] (every role). Start with --auth to require keys."
        )
        return env
    env["VERIFIER_AUTH__LOCAL_ADMIN"] = "false"
    env["VERIFIER_AUTH__COOKIE_SECURE"] = "false"
    _first_start_credentials()
    return env


def _first_start_credentials() -> None:
    from verifier_service.auth import repository, service
    from verifier_service.core.db import transaction, utcnow

    with transaction() as session:
        if repository.any_usable_credential(session, utcnow()):
            console.print("[green]auth on:[/] using the keys and users already created")
            return
        # The person trying dev is admin, operator and reviewer at once: every page opens.
        everything = [Role.admin, Role.operator, Role.reviewer]
        admin = service.create_key(session, name="admin", roles=everything, created_by="dev")
        trainer = service.create_key(session, name="dev-trainer", roles=[Role.trainer],
                                     created_by="dev")  # fmt: skip
        password = secrets.token_urlsafe(12)
        service.create_user(session, "admin", everything, password, "dev")
    console.print("[bold green]auth on[/]: created on first start, shown only now:")
    console.print(f"  admin key   (admin, operator, reviewer): {admin.key}")
    console.print(f"  trainer key (trainer):                   {trainer.key}")
    console.print(f"  sign-in at /signin as admin with password: {password}")
