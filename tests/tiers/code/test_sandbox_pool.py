"""The pool's lifecycle, start-up checks and the image command, against the real engine."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tiers.base import Candidate, VerdictStatus
from tiers.code.engine import (
    LABEL,
    OWNER_LABEL,
    SandboxUnavailableError,
    check_engine,
    resolve_runtime,
    startup_check,
)
from tiers.code.image import apt_mirror
from tiers.code.pool import SandboxPool
from tiers.code.sandbox import SandboxTier
from tiers.code.settings import SandboxSettings
from verifier_service.sandbox.cli import sandbox_app


def labelled(client: Any, owner: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = client.api.containers(
        all=True, filters={"label": f"{OWNER_LABEL}={owner}"}
    )
    return found


def test_pool_keeps_warm_locked_down_containers_and_removes_all_on_shutdown(
    sandbox_settings: SandboxSettings, docker_client: Any
) -> None:
    pool = SandboxPool(sandbox_settings.model_copy(update={"pool_size": 3}))
    try:
        deadline = time.monotonic() + 20
        while pool.ready_count() < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pool.ready_count() == 3
        warm = labelled(docker_client, pool.owner)
        assert len(warm) == 3
        config = docker_client.api.inspect_container(warm[0]["Id"])
        host = config["HostConfig"]
        assert host["NetworkMode"] == "none"
        assert host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in host["SecurityOpt"]
        assert host["PidsLimit"] == sandbox_settings.pids_limit
        assert host["Memory"] == host["MemorySwap"] == sandbox_settings.default_memory_mb << 20
        assert host["NanoCpus"] == int(sandbox_settings.cpus * 1e9)
        assert f"size={sandbox_settings.tmpfs_mb}m" in host["Tmpfs"]["/work"]
        # The judge is root with three capabilities; it starts the candidate as uid 1000.
        assert config["Config"]["User"] == "0:0"
        assert sorted(host["CapAdd"]) == ["KILL", "SETGID", "SETUID"]
        assert "uid=0" in host["Tmpfs"]["/judge"]
        assert "mode=0700" in host["Tmpfs"]["/judge"]
        assert host["Runtime"] == pool.runtime
    finally:
        pool.shutdown()
    assert labelled(docker_client, pool.owner) == []


def test_startup_check_removes_containers_of_dead_owners(
    sandbox_settings: SandboxSettings, docker_client: Any
) -> None:
    dead_owner = f"{socket.gethostname()}:4194000:1"  # above pid_max: never a live process
    labels = {LABEL: "1", OWNER_LABEL: dead_owner}
    stale = docker_client.api.create_container(
        sandbox_settings.image, command=["sleep", "infinity"], labels=labels
    )
    startup_check(sandbox_settings)
    assert labelled(docker_client, dead_owner) == []
    ids = {c["Id"] for c in docker_client.api.containers(all=True)}
    assert stale["Id"] not in ids


def test_missing_image_is_a_clear_startup_error(sandbox_settings: SandboxSettings) -> None:
    settings = sandbox_settings.model_copy(update={"image": "verifier-sandbox:no-such-tag"})
    with pytest.raises(SandboxUnavailableError, match="sandbox build-image"):
        check_engine(settings)


def test_unreachable_engine_is_a_clear_startup_error(sandbox_settings: SandboxSettings) -> None:
    settings = sandbox_settings.model_copy(update={"docker_url": "unix:///nonexistent/docker.sock"})
    with pytest.raises(SandboxUnavailableError, match="not reachable at unix:///nonexistent"):
        check_engine(settings)


def test_runtime_auto_prefers_crun_and_a_named_runtime_is_used(
    sandbox_settings: SandboxSettings, docker_client: Any
) -> None:
    info = docker_client.info()
    auto = resolve_runtime(sandbox_settings.model_copy(update={"runtime": "auto"}), docker_client)
    # .ci/install-docker.sh registers crun only where it can run containers.
    assert auto == ("crun" if "crun" in info["Runtimes"] else info["DefaultRuntime"])
    named = sandbox_settings.model_copy(update={"runtime": "runc", "pool_size": 1})
    assert resolve_runtime(named, docker_client) == "runc"
    pool = SandboxPool(named)
    try:
        deadline = time.monotonic() + 20
        while pool.ready_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        for cid in pool.owned():
            assert docker_client.api.inspect_container(cid)["HostConfig"]["Runtime"] == "runc"
        outcome = pool.run(
            {"mode": "run", "code": "print('hi')", "tests": "", "timeout_s": 5.0,
             "output_cap": 1024, "output_limit": 4096},
            5.0,
            sandbox_settings.default_memory_mb,
        )  # fmt: skip
        assert outcome.report is not None
        assert outcome.report["run"]["stdout"] == "hi\n"
    finally:
        pool.shutdown()


def test_runtime_missing_from_the_engine_stops_worker_startup(
    sandbox_settings: SandboxSettings,
) -> None:
    missing = sandbox_settings.model_copy(update={"runtime": "no-such-runtime"})
    with pytest.raises(SandboxUnavailableError) as raised:
        startup_check(missing)
    message = str(raised.value)
    assert "'no-such-runtime' (sandbox.runtime) is not registered" in message
    assert "runc" in message  # what the engine does have
    assert "VERIFIER_SANDBOX__RUNTIME=auto" in message


def test_batch_runs_concurrently_and_keeps_order(tier: SandboxTier, sandbox_pool: Any) -> None:
    items = [
        Candidate(
            kind="code",
            payload={"code": f"import time\ntime.sleep(0.5)\nN = {i}", "tests": f"assert N == {i}"},
        )
        for i in range(8)
    ]
    items[5] = Candidate(kind="code", payload={"code": "N = -1", "tests": "assert N == 5"})
    started = time.monotonic()
    verdicts = tier.verify_batch(items, {})
    elapsed = time.monotonic() - started
    assert [v.status for v in verdicts] == [VerdictStatus.passed] * 5 + [VerdictStatus.failed] + [
        VerdictStatus.passed
    ] * 2
    assert elapsed < 8 * 0.5  # four at a time, not one by one


def test_build_image_if_missing_is_a_no_op_when_present(sandbox_settings: SandboxSettings) -> None:
    result = CliRunner().invoke(sandbox_app, ["build-image", "--if-missing"])
    assert result.exit_code == 0, result.output
    assert "already exists" in result.output


def test_check_command_reports_ready(sandbox_settings: SandboxSettings) -> None:
    result = CliRunner().invoke(sandbox_app, ["check"])
    assert result.exit_code == 0, result.output
    assert "sandbox ready" in result.output


def test_debootstrap_mirror_comes_from_apt_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n"
    )
    assert apt_mirror(tmp_path) == "http://mirror.example/debian"
    assert apt_mirror(tmp_path / "nothing") == "http://deb.debian.org/debian"
