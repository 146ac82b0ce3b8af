"""Request and response of the SandboxFusion-compatible `POST /run_code`."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class RunCodeRequest(BaseModel):
    """SandboxFusion's RunCodeRequest: run one program, no tests."""

    compile_timeout: float = Field(
        10,
        description="Compile time limit of a compiled language, seconds (unused for python, "
        "bash and nodejs); at most sandbox.compile_max_timeout_s.",
    )
    run_timeout: float = Field(10, description="Wall-clock limit of the run, seconds.")
    memory_limit_MB: int = Field(-1, description="Memory limit in MB; -1: the default.")
    code: str = Field(..., examples=['print("hello")'], description="The program to run.")
    stdin: str | None = Field(None, examples=[""], description="Text passed on stdin.")
    language: str = Field(
        ...,
        examples=["python"],
        description="python, bash, cpp (C++17; cpp11/cpp14/cpp20), c, java (class Main), "
        "nodejs, typescript, go, rust; aliases such as python3, javascript, golang accepted.",
    )
    files: dict[str, str | None] = Field(
        default_factory=dict, description="Path in the work dir -> base64 content, written first."
    )
    fetch_files: list[str] = Field(
        default_factory=list, description="Paths whose content (base64) is returned after the run."
    )


class RunStatus(StrEnum):
    """Outcome of the whole request."""

    Success = "Success"  # every command finished with return code 0
    Failed = "Failed"  # non-zero return code or time limit exceeded
    SandboxError = "SandboxError"  # the sandbox could not run it


class CommandRunStatus(StrEnum):
    """Outcome of one command (compile or run)."""

    Finished = "Finished"
    Error = "Error"
    TimeLimitExceeded = "TimeLimitExceeded"


class CommandRunResult(BaseModel):
    """What one command did."""

    status: CommandRunStatus
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    """SandboxFusion's RunCodeResponse."""

    status: RunStatus
    message: str
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
