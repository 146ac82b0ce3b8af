"""The trainer's client installs and runs alone: `pip install verifier-service` (no extras) into a
fresh virtual environment gives httpx and pydantic, scores a batch against a running service and
never imports the server's heavy parts (RDKit, Celery, FastAPI, the CEL engine)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

#: What the client and the wire contract may import beyond the standard library.
LIGHT = ("httpx", "pydantic", "pydantic_core", "pydantic_settings", "typing_extensions")

#: The server's modules (and their dependencies) a trainer's environment must not need.
HEAVY = ("rdkit", "celery", "kombu", "fastapi", "starlette", "sqlalchemy", "cel", "docker",
         "redis", "jinja2", "typer", "structlog", "jsonschema")  # fmt: skip


def _imports(path: Path) -> set[str]:
    """What a module imports when it is imported (imports inside functions are lazy: the TRL
    adapter's TRL and torch, the SMILES mapping's optional RDKit)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    guarded = (n for c in tree.body if isinstance(c, ast.If | ast.Try) for n in ast.walk(c))
    nodes = [*tree.body, *guarded]
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


def _allowed_for_client(name: str) -> bool:
    top = name.split(".")[0]
    return (
        top in sys.stdlib_module_names
        or top in LIGHT
        or name in ("tiers", "tiers.base", "verifier_service")
        or name.startswith(("verifier_service.client", "verifier_service.wire"))
    )


def test_the_client_and_the_wire_contract_import_nothing_of_the_server() -> None:
    files = [*(REPO / "verifier_service/client").rglob("*.py"),
             *(REPO / "verifier_service/wire").rglob("*.py"), REPO / "tiers/base.py",
             REPO / "tiers/__init__.py", REPO / "verifier_service/__init__.py"]  # fmt: skip
    offending = {
        str(path.relative_to(REPO)): sorted(
            name for name in _imports(path) if not _allowed_for_client(name)
        )
        for path in files
    }
    assert {path: names for path, names in offending.items() if names} == {}


def test_the_grpo_trainer_is_a_client_program() -> None:
    server = {
        str(path.relative_to(REPO)): sorted(
            name
            for name in _imports(path)
            if name.split(".")[0] in ("workers", "tiers")
            or (name.startswith("verifier_service") and not _allowed_for_client(name))
        )
        for path in (REPO / "trainer").rglob("*.py")
    }
    assert {path: names for path, names in server.items() if names} == {}


SCORE = """
import json, sys
from verifier_service.client import VerifierClient, RewardStatus
with VerifierClient(sys.argv[1], api_key=sys.argv[2], principal="client-alone") as client:
    rewards = client.score(
        [{"kind": "molecule", "payload": {"smiles": "CC(=O)Oc1ccccc1C(=O)O"}},
         {"kind": "molecule", "payload": {"smiles": "C1CC"}}],
        timeout_s=60,
    )
heavy = sorted(m for m in sys.modules if m.split(".")[0] in json.loads(sys.argv[3]))
print(json.dumps({"rewards": [[r.status.value, r.value, r.reason] for r in rewards],
                  "heavy": heavy}))
"""


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with `pip install <this repo>` and no extras."""
    where = tmp_path_factory.mktemp("client-venv")
    venv.create(where, with_pip=True)
    # A copy of the source without the developer's .venv and build leftovers: pip builds there.
    source = tmp_path_factory.mktemp("client-src")
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True, capture_output=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((REPO / name).read_bytes())
    installed = subprocess.run(
        [str(where / "bin/pip"), "install", "-q", "--disable-pip-version-check", str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]
    return where


def test_the_client_installed_alone_has_only_light_dependencies(client_venv: Path) -> None:
    listed = subprocess.run(
        [str(client_venv / "bin/pip"), "list", "--format=json", "--disable-pip-version-check"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    names = {entry["name"].lower().replace("_", "-") for entry in json.loads(listed.stdout)}
    assert {"verifier-service", "httpx", "pydantic", "pydantic-settings"} <= names
    assert names.isdisjoint({"rdkit", "celery", "fastapi", "sqlalchemy", "docker",
                             "common-expression-language", "redis", "uvicorn"})  # fmt: skip


def test_the_client_installed_alone_scores_a_batch_without_loading_the_server(
    client_venv: Path, live_service: Any
) -> None:
    ran = subprocess.run(
        [str(client_venv / "bin/python"), "-c", SCORE, live_service.base_url,
         live_service.api_key, json.dumps(HEAVY)],
        capture_output=True, text=True, timeout=120, cwd="/",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    answer = json.loads(ran.stdout)
    assert answer["heavy"] == []
    (aspirin, ring), reasons = answer["rewards"], [r[2] for r in answer["rewards"]]
    assert aspirin[0] == "scored"
    assert aspirin[1] > 0.4
    assert ring[:2] == ["scored", 0.0]
    assert "invalid molecule" in reasons[1]


def test_the_server_command_on_a_client_install_names_the_extra(client_venv: Path) -> None:
    ran = subprocess.run(
        [str(client_venv / "bin/verifier-service"), "dev"],
        capture_output=True, text=True, timeout=60, cwd="/",
    )  # fmt: skip
    assert ran.returncode == 2
    assert "pip install 'verifier-service[server]'" in ran.stderr
    assert "Traceback" not in ran.stderr
