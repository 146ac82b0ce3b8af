"""Settings of the code tiers (the service composes them as its `sandbox` group)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tiers.code.languages import BASE_FAMILY, family_tag


class SandboxSettings(BaseModel):
    """The Docker sandbox used by the code.sandbox tier."""

    image: str = Field(
        default_factory=lambda: family_tag(BASE_FAMILY),
        description="Image Python and Bash run in. Default: the Python family's image as "
        "`sandbox build-image` builds it, tagged with a hash of its inputs "
        "(verifier-sandbox-python:HASH), so a change of its packages means a new image.",
    )
    isolation: Literal["process", "container"] = Field(
        default="process",
        description="process: one warm container per job (one request's code items), whose "
        "trusted judge runs each candidate in a fresh process under the candidate uid, with its "
        "own limits and an emptied work dir, and removes everything the candidate left before "
        "the next; container: one container per candidate (about 2.3x fewer candidates per "
        "second). A policy's config may ask for either. See docs/reward-integrity.md.",
    )
    job_containers: int = Field(
        default=2,
        ge=1,
        description="isolation process: containers one job's candidates are spread over (each "
        "serves its share one after another; none serves another job).",
    )
    pool_size: int = Field(
        default=32,
        description="Pre-started containers kept warm per worker process. A burst of candidates "
        "no larger than this runs on warm containers only; the pool refills when no candidate "
        "is in flight, and candidates beyond it wait for a container started for them. Size it "
        "to about the code candidates of one training step that reach one sandbox worker "
        "process; an idle warm container holds about 9 MB of host memory (harness + shim).",
    )
    runtime: str = Field(
        default="auto",
        description="OCI runtime of the sandbox containers: `auto` takes crun when the engine "
        "has it registered and it runs a locked-down container (cheaper start-up than runc), "
        "else the engine's default runtime (runc); or the name of a runtime registered with the "
        "engine (daemon.json `runtimes`), checked at worker start-up.",
    )
    docker_url: str | None = Field(
        default=None, description="Docker engine URL; default: the environment's (DOCKER_HOST)."
    )
    default_timeout_s: float = Field(default=10.0, description="Wall-clock limit per candidate.")
    default_memory_mb: int = Field(default=256, description="Memory limit per candidate.")
    pids_limit: int = Field(default=64, description="Most processes a candidate may have.")
    cpus: float = Field(default=1.0, description="CPU quota per candidate container.")
    tmpfs_mb: int = Field(default=64, description="Size of the writable work dir.")
    output_cap_bytes: int = Field(default=64 * 1024, description="Stdout/stderr kept per run.")
    output_limit_bytes: int = Field(
        default=2 * 1024 * 1024,
        description="Stdout+stderr a candidate may write in all; past it the run is killed "
        "(reason output_limit).",
    )
    max_timeout_s: float = Field(
        default=60.0, description="Largest wall-clock limit a payload or config may ask for."
    )
    max_memory_mb: int = Field(
        default=2048, description="Largest memory limit a payload or config may ask for."
    )
    max_source_bytes: int = Field(
        default=512 * 1024,
        description="Largest code + tests + setup accepted for one candidate.",
    )
    concurrency: int = Field(
        default=4, description="Candidates of one batch run at the same time in one process."
    )
    acquire_timeout_s: float = Field(
        default=30.0,
        description="How long a candidate waits for a warm container before one is started "
        "for it on the spot.",
    )
    run_code_output_limit_bytes: int = Field(
        default=16 * 1024 * 1024,
        description="`POST /run_code`: stdout+stderr a program may write. Output within it is "
        "returned whole (as SandboxFusion does); past it the run is killed and the output kept "
        "so far is returned with a note in stderr (SandboxFusion has no such limit).",
    )
    run_code_max_timeout_s: float = Field(
        default=300.0,
        description="`POST /run_code`: largest `run_timeout` honoured; longer requests are cut "
        "to it (SandboxFusion honours any value).",
    )
    run_code_memory_mb: int = Field(
        default=2048,
        description="`POST /run_code`: memory limit of a run that sends no `memory_limit_MB` "
        "(SandboxFusion's default is no limit, and its SDK cannot send one). A request's own "
        "limit is honoured up to `max_memory_mb`.",
    )
    run_code_pool_size: int = Field(
        default=0,
        description="`POST /run_code`: warm containers an API process keeps for it. 0: none; "
        "each run starts its own container (about 0.2 s more) and removes it, so an idle or "
        "stopped API process leaves no containers behind.",
    )
    run_code_concurrency: int = Field(
        default=16,
        ge=1,
        description="`POST /run_code`: programs one API process runs at once, on a thread pool "
        "of their own (the API's other routes never wait for them); one more gets 429 with "
        "Retry-After and `cap: overall`.",
    )
    run_code_concurrency_per_key: int = Field(
        default=8,
        ge=1,
        description="`POST /run_code`: programs one key (or one signed-in person) has running "
        "at once, counted in Redis over every API process; one more gets 429 with Retry-After "
        "and `cap: per_key`.",
    )
    language_pool_size: int = Field(
        default=2,
        description="Warm containers kept per worker process for each language family other "
        "than Python's (C/C++, Node.js/TypeScript, Go, Rust, Java: one image each); Python's "
        "pool is `pool_size`. 0: a container is started for each candidate.",
    )
    language_pool_sizes: dict[str, int] = Field(
        default_factory=dict,
        description='Per-family override of `language_pool_size`, e.g. {"gcc": 8, '
        '"java": 0} (families: gcc, node, go, rust, java).',
    )
    compile_max_timeout_s: float = Field(
        default=60.0, description="Largest compile time limit a payload or request may ask for."
    )
    language_image_check_s: float = Field(
        default=30.0,
        description="How long a process trusts what it found out about a language image being "
        "built (an unbuilt language is refused at submit).",
    )
    debian_mirror: str | None = Field(
        default=None,
        description="Debian mirror for `sandbox build-image`; default: the one apt is "
        "configured with, else http://deb.debian.org/debian.",
    )
