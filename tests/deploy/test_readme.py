"""The README is the front door: short, its links lead somewhere, the commands it shows exist,
and its example request is the one the end-to-end tests send."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from verifier_service.cli import app

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
FENCES = re.findall(r"```(\w*)\n(.*?)```", README, re.S)


def test_the_readme_stays_a_front_door() -> None:
    assert len(README.encode()) <= 12_000
    for heading in ("## The two commands", "## For trainers", "## For reviewers",
                    "## For operators", "## Where to go next"):  # fmt: skip
        assert heading in README


def test_the_two_commands_are_the_ci_script_and_dev() -> None:
    blocks = [body.strip() for _, body in FENCES]
    assert "bash .ci/test" in blocks
    assert (
        "python3 -m venv .venv && .venv/bin/pip install -e '.[server]' && "
        ".venv/bin/verifier-service dev" in blocks
    )
    assert (REPO / ".ci" / "test").is_file()


def test_every_link_of_the_readme_leads_to_a_file() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    assert links
    missing = [link for link in links if not (REPO / link).exists()]
    assert missing == []


def _cli_commands() -> list[list[str]]:
    """`verifier-service SUB [SUBSUB]` as the README's shell blocks write them."""
    found = []
    for lang, body in FENCES:
        if lang not in ("", "sh", "bash"):
            continue
        for line in body.splitlines():
            for part in re.split(r"&&|;", line.split("  #")[0]):
                if "verifier-service" not in part:
                    continue
                words = shlex.split(part)
                if words and words[0].endswith("verifier-service"):
                    found.append([w for w in words[1:3] if not w.startswith("-")])
    return found


def test_the_commands_the_readme_shows_exist() -> None:
    commands = _cli_commands()
    assert ["dev"] in commands
    assert ["keys", "create"] in commands
    for words in commands:
        result = CliRunner().invoke(app, [*words[:2], "--help"])
        assert result.exit_code == 0, (words, result.output)


def test_the_example_request_is_the_one_the_end_to_end_tests_send() -> None:
    curl = next(body for _, body in FENCES if body.startswith("curl -s localhost:8000/v1/rewards"))
    sent = json.loads(curl.split("-d '", 1)[1].rsplit("'", 1)[0])
    spec = importlib.util.spec_from_file_location(
        "readme_e2e", REPO / "tests" / "e2e" / "test_rewards_live.py"
    )
    assert spec is not None
    assert spec.loader is not None
    e2e = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(e2e)
    # The tests wait longer than the README's 5 s: a loaded CI machine starts slowly.
    assert {**sent, "wait_s": e2e.README_REQUEST["wait_s"]} == e2e.README_REQUEST
