"""compose.yaml cannot start here (no image registry); check it names real commands and settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from typer.main import get_command

from verifier_service.cli import app
from verifier_service.settings import Settings

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "compose.yaml").read_text())
APP_SERVICES = {
    name: spec for name, spec in COMPOSE["services"].items() if spec.get("build") == "."
}


def _setting_exists(env_name: str) -> bool:
    model: Any = Settings
    parts = env_name.removeprefix("VERIFIER_").lower().split("__")
    for part in parts:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return False
        field = model.model_fields.get(part)
        if field is None:
            return False
        model = field.annotation
    return True


def test_every_app_service_runs_a_real_cli_command() -> None:
    commands = get_command(app).commands  # type: ignore[attr-defined]
    assert {"api", "worker-fast", "worker-sandbox", "migrate"} <= set(APP_SERVICES)
    for name, spec in APP_SERVICES.items():
        command = spec["command"][0]
        assert command in commands, f"{name} runs unknown command {command!r}"
        options = {o for o in spec["command"][1:] if o.startswith("--")}
        known = {opt for p in commands[command].params for opt in p.opts}
        assert options <= known, f"{name}: unknown options {options - known}"


@pytest.mark.parametrize("service", sorted(APP_SERVICES))
def test_env_vars_are_real_settings(service: str) -> None:
    env = APP_SERVICES[service]["environment"]
    for name in env:
        if name.startswith("VERIFIER_"):
            assert _setting_exists(name), f"{service}: {name} is not a setting"


def test_worker_queues_cover_every_queue() -> None:
    from verifier_service.core.broker import QUEUES

    consumed = set()
    for spec in APP_SERVICES.values():
        if spec["command"][0] == "worker":
            consumed |= set(spec["command"][spec["command"].index("--queues") + 1].split(","))
    assert consumed == set(QUEUES)


def test_infrastructure_has_healthchecks() -> None:
    for name in ("postgres", "redis", "api"):
        assert "healthcheck" in COMPOSE["services"][name]
