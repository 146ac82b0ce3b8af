"""Engine setup of the code sandbox: the Docker client, the image and runtime checks, the
locked-down container options, and which containers belong to which process."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from typing import Any

from tiers.code.settings import SandboxSettings

logger = logging.getLogger(__name__)

LABEL = "verifier-service.sandbox"
OWNER_LABEL = "verifier-service.sandbox.owner"
SANDBOX_USER = "1000:1000"
# The judge (the harness, PID 1) runs as root in the container with only the capabilities it
# needs to start the candidate under SANDBOX_USER's uid and to kill what the candidate leaves.
JUDGE_USER = "0:0"
JUDGE_CAPABILITIES = ["SETUID", "SETGID", "KILL"]
# Writable scratch places besides the work dir, on a read-only root: SandboxFusion's programs
# write /mnt/b or /tmp/x by absolute path. The candidate's own tmpfs each (the judge empties them
# between candidates, harness/serve.py), noexec: only /work holds programs.
SCRATCH_DIRS = ("/mnt", "/tmp")
# Taken by runtime "auto" when the engine has it: a C runtime, it starts and deletes a
# container with less CPU than runc (Go), which is what bounds throughput on a small machine.
PREFERRED_RUNTIME = "crun"


def isolation_options(s: SandboxSettings, runtime: str) -> dict[str, Any]:
    """The locked-down host config of every sandbox container (docker-py create_host_config)."""
    uid, _, gid = SANDBOX_USER.partition(":")
    scratch = f"size={s.tmpfs_mb}m,uid={uid},gid={gid},mode=0700,noexec"
    return {
        "runtime": runtime,
        "network_mode": "none",
        "read_only": True,
        "tmpfs": {
            # exec: compiled languages run the binary they build here (nosuid stays).
            "/work": f"size={s.tmpfs_mb}m,uid={uid},gid={gid},mode=0700,exec",
            "/judge": "size=16m,uid=0,gid=0,mode=0700",
            **dict.fromkeys(SCRATCH_DIRS, scratch),
        },
        "mem_limit": f"{s.default_memory_mb}m",
        "memswap_limit": f"{s.default_memory_mb}m",
        "pids_limit": s.pids_limit,
        "nano_cpus": int(s.cpus * 1e9),
        "cap_drop": ["ALL"],
        "cap_add": JUDGE_CAPABILITIES,
        "security_opt": ["no-new-privileges"],
        "ipc_mode": "private",
        "shm_size": f"{min(s.tmpfs_mb, 16)}m",
        "ulimits": [{"Name": "core", "Soft": 0, "Hard": 0}],
    }


class SandboxUnavailableError(RuntimeError):
    """The Docker engine or the sandbox image is not usable; the message says how to fix it."""


def _process_start_time(pid: int) -> str:
    """Start time of `pid` in clock ticks since boot ("" if unknown): tells reused pids apart."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return ""
    return stat[stat.rfind(")") + 2 :].split()[19]


def owner_tag() -> str:
    """host:pid:start-time:pool-id; the pool id tells apart two pools of one process."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_process_start_time(pid)}:{uuid.uuid4().hex[:8]}"


def _owner_is_gone(owner: str) -> bool:
    """Whether the process that labelled a container as `owner` no longer runs on this host."""
    host, pid_text, start, *_ = [*owner.split(":"), "", "", ""]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another machine's worker: not ours to judge
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return bool(start) and _process_start_time(pid) != start


def make_client(settings: SandboxSettings) -> Any:
    """A Docker client for the configured engine (raises docker.errors.DockerException)."""
    import docker

    # Reads of a running exec's output may be quiet for the whole candidate time limit.
    timeout = int(max(60.0, 2 * settings.max_timeout_s + 30))
    pool_size = 2 * (settings.pool_size + settings.concurrency) + 8
    if settings.docker_url:
        return docker.DockerClient(
            base_url=settings.docker_url, timeout=timeout, max_pool_size=pool_size
        )
    return docker.from_env(timeout=timeout, max_pool_size=pool_size)


def check_engine(settings: SandboxSettings, client: Any | None = None) -> Any:
    """Return a client after checking the engine answers and the image exists."""
    import docker.errors

    where = _where(settings)
    try:
        client = client or make_client(settings)
        client.ping()
    except Exception as exc:  # the SDK raises many kinds (DockerException, requests errors)
        raise SandboxUnavailableError(
            f"Docker engine not reachable at {where}: {exc}. Start it (e.g. "
            "`bash .ci/install-docker.sh`) or set VERIFIER_SANDBOX__DOCKER_URL."
        ) from exc
    try:
        client.images.get(settings.image)
    except docker.errors.ImageNotFound as exc:
        raise SandboxUnavailableError(
            f"sandbox image {settings.image!r} is missing from the Docker engine at {where}; "
            "build it with `verifier-service sandbox build-image` (or build "
            "docker/sandbox.Dockerfile and set VERIFIER_SANDBOX__IMAGE)."
        ) from exc
    except docker.errors.DockerException as exc:
        raise SandboxUnavailableError(f"cannot inspect image {settings.image!r}: {exc}") from exc
    return client


def _where(settings: SandboxSettings) -> str:
    return settings.docker_url or "the default socket (DOCKER_HOST or /var/run/docker.sock)"


def _probe_runtime(settings: SandboxSettings, client: Any, runtime: str) -> str | None:
    """Run `true` in a locked-down container under `runtime`; None if it worked, else why not."""
    api = client.api
    cid: str | None = None
    try:
        host_config = api.create_host_config(
            **isolation_options(settings, runtime), log_config={"Type": "none", "Config": {}}
        )
        cid = api.create_container(
            settings.image,
            command=["true"],
            user=SANDBOX_USER,
            labels={LABEL: "1", OWNER_LABEL: owner_tag()},
            host_config=host_config,
        )["Id"]
        api.start(cid)
        status = api.wait(cid, timeout=30).get("StatusCode")
        return None if status == 0 else f"the probe container exited with status {status}"
    except Exception as exc:  # engine errors come as many kinds; each is a reason here
        return f"{type(exc).__name__}: {exc}"
    finally:
        if cid is not None:
            try:
                api.remove_container(cid, force=True)
            except Exception:
                logger.warning("could not remove runtime probe container %s", cid[:12])


def resolve_runtime(settings: SandboxSettings, client: Any) -> str:
    """The OCI runtime sandbox containers run under (settings.runtime checked on the engine).

    `auto` takes crun when the engine has it and a locked-down container runs under it, else
    the engine's default runtime. A named runtime must be registered with the engine and run
    the probe container, or this raises SandboxUnavailableError saying how to fix it.
    """
    try:
        info = client.info()
    except Exception as exc:
        raise SandboxUnavailableError(
            f"cannot ask the Docker engine at {_where(settings)} for its runtimes: {exc}"
        ) from exc
    registered = sorted(info.get("Runtimes") or {})
    default = str(info.get("DefaultRuntime") or "runc")
    wanted = settings.runtime
    if wanted == "auto":
        if PREFERRED_RUNTIME in registered and PREFERRED_RUNTIME != default:
            problem = _probe_runtime(settings, client, PREFERRED_RUNTIME)
            if problem is None:
                return PREFERRED_RUNTIME
            logger.warning(
                "sandbox runtime auto: the engine has %s but it cannot run a sandbox container "
                "(%s); using the engine's default runtime %s",
                PREFERRED_RUNTIME,
                problem,
                default,
            )
        return default
    if wanted not in registered:
        raise SandboxUnavailableError(
            f"OCI runtime {wanted!r} (sandbox.runtime) is not registered with the Docker engine "
            f"at {_where(settings)}; it has: {', '.join(registered) or 'none'}. Register it in "
            "the engine's daemon.json `runtimes` (`bash .ci/install-docker.sh` does so for "
            "crun) or set VERIFIER_SANDBOX__RUNTIME=auto."
        )
    problem = _probe_runtime(settings, client, wanted)
    if problem is not None:
        raise SandboxUnavailableError(
            f"OCI runtime {wanted!r} (sandbox.runtime) cannot run a sandbox container on the "
            f"Docker engine at {_where(settings)}: {problem}. Fix the runtime's setup or set "
            "VERIFIER_SANDBOX__RUNTIME=auto."
        )
    return wanted


def remove_stale_containers(client: Any) -> int:
    """Remove labelled containers whose owning process on this host has died; return count."""
    removed = 0
    for info in client.api.containers(all=True, filters={"label": LABEL}):
        owner = (info.get("Labels") or {}).get(OWNER_LABEL, "")
        if _owner_is_gone(owner):
            try:
                client.api.remove_container(info["Id"], force=True)
                removed += 1
            except Exception:
                logger.warning("could not remove stale sandbox container %s", info["Id"][:12])
    if removed:
        logger.info("removed %d stale sandbox containers", removed)
    return removed


def startup_check(settings: SandboxSettings) -> str:
    """Fail fast at worker start-up: engine reachable, image present, the runtime runs a
    sandbox container; clear stale containers. Returns the runtime containers will use."""
    client = check_engine(settings)
    remove_stale_containers(client)
    return resolve_runtime(settings, client)
