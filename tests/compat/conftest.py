"""What the compatibility tests share: the official SandboxFusion SDK, installed once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SDK = "sandbox-fusion==0.3.7"


@pytest.fixture(scope="session")
def sdk_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `sandbox-fusion` SDK from PyPI, unchanged, in a folder of its own (PYTHONPATH)."""
    target = tmp_path_factory.mktemp("sandbox-fusion-sdk")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--target", str(target), SDK],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return target
