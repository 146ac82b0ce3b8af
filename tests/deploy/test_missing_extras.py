"""A worker says at start which active policies' steps it cannot run for want of an extra
(issue 35, newcomer path): on the README's install (the `server` extra alone) the shipped
drug-likeness policy's chem.surrogate (xTB: tblite) and chem.dft (PySCF) steps ended every
escalated molecule with an error verdict, and nothing said so until a molecule climbed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

CLI = str(Path(sys.executable).with_name("verifier-service"))
HIDE = "import sys\nfor name in ({names}):\n    sys.modules[name] = None\n"


def _env(tmp_path: Path, redis_url: str, hidden: tuple[str, ...]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    # As if the packages were not installed: find_spec answers None for a None module.
    (site / "sitecustomize.py").write_text(HIDE.format(names="".join(f"{n!r}," for n in hidden)))
    env["PYTHONPATH"] = str(site)
    env["VERIFIER_DATA_DIR"] = str(tmp_path / "data")
    env["VERIFIER_BROKER__URL"] = redis_url
    return env


def _worker_warnings(tmp_path: Path, env: dict[str, str], queues: str) -> str:
    """The worker's start-up output, up to Celery's banner."""
    worker = subprocess.Popen(
        [CLI, "worker", "--queues", queues, "--concurrency", "1"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines = []
    try:
        deadline = time.monotonic() + 90
        assert worker.stdout is not None
        while time.monotonic() < deadline:
            line = worker.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "[queues]" in line or "ready." in line:
                break
    finally:
        worker.kill()
        worker.wait(timeout=30)
    return "".join(lines)


def test_a_worker_names_the_policy_steps_it_lacks_an_extra_for(
    tmp_path: Path, redis_url: str
) -> None:
    env = _env(tmp_path, redis_url, ("tblite", "pyscf"))
    subprocess.run([CLI, "migrate"], cwd=tmp_path, env=env, check=True, timeout=120)
    out = _worker_warnings(tmp_path, env, "tier.sim,tier.hifi")
    assert "[queues]" in out or "ready." in out, out  # the worker did start
    joined = " ".join(out.split())
    surrogate = (
        "policy drug-likeness (molecule): step chem.surrogate needs tblite (extra 'quantum')"
    )
    assert surrogate in joined, out
    assert "step chem.dft needs pyscf (extra 'quantum')" in joined, out
    # A worker of other queues is not told about steps it never runs.
    fast = " ".join(_worker_warnings(tmp_path, env, "tier.fast").split())
    assert "needs tblite" not in fast


def test_with_the_extras_installed_nothing_is_said(tmp_path: Path, redis_url: str) -> None:
    env = _env(tmp_path, redis_url, ())
    subprocess.run([CLI, "migrate"], cwd=tmp_path, env=env, check=True, timeout=120)
    out = _worker_warnings(tmp_path, env, "tier.sim,tier.hifi")
    assert "[queues]" in out or "ready." in out, out
    assert "needs" not in out, out
