"""The API process keeps glibc's malloc to the arenas its setting allows: each thread of its
request pool otherwise gets an arena of its own, and each arena keeps its high-water mark (the
API's RSS grew ~2.4 MB a minute through a soak while its memory in use stayed flat)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: Builds the API app (as `verifier-service api` does), then has eight threads allocate at once
#: and hold their memory, and prints how many arenas glibc's malloc_info reports.
PROBE = """
import ctypes, os, sys, tempfile, threading
from verifier_service.app import create_app
create_app(check_migrations=False)
start, done = threading.Barrier(9), threading.Barrier(9)
def work():
    start.wait()
    held = [bytearray(200_000) for _ in range(4)]  # above pymalloc: from malloc's arena
    done.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
start.wait()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
path = os.path.join(tempfile.mkdtemp(), "malloc.xml")
stream = ctypes.c_void_p(libc.fopen(path.encode(), b"w"))
libc.malloc_info(0, stream)
libc.fclose(stream)
done.wait()
print(open(path).read().count('<heap nr="'))
"""


def _arenas(tmp_path: Path, **settings: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERIFIER_", "MALLOC_"))}
    env.update(
        VERIFIER_DATA_DIR=str(tmp_path),
        VERIFIER_DATABASE__URL=f"sqlite:///{tmp_path}/probe.db",
        PYTHONPATH=str(REPO),
        **settings,
    )
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=REPO, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="a glibc setting")
def test_the_api_process_keeps_malloc_to_the_arenas_its_setting_allows(tmp_path: Path) -> None:
    assert _arenas(tmp_path) <= 2  # the default
    assert _arenas(tmp_path, VERIFIER_MALLOC_ARENA_MAX="0") > 2  # glibc's own: one per thread
    # An operator's MALLOC_ARENA_MAX is left to glibc.
    assert _arenas(tmp_path, MALLOC_ARENA_MAX="4") == 4
