"""HTTP routes of the sandbox: a SandboxFusion-compatible `POST /run_code`."""

from __future__ import annotations

from fastapi import APIRouter

from verifier_service.auth.deps import KEY_IN_PATH, TrainerPrincipal
from verifier_service.core.deps import SettingsDep
from verifier_service.sandbox import service
from verifier_service.sandbox.schemas import RunCodeRequest, RunCodeResponse

router = APIRouter(tags=["sandbox"])


@router.post("/run_code", response_model=RunCodeResponse)
@router.post(
    "/k/{api_key}/run_code",
    response_model=RunCodeResponse,
    dependencies=[KEY_IN_PATH],
    summary="Run Code (API key in the path)",
)
async def run_code(
    request: RunCodeRequest, principal: TrainerPrincipal, settings: SettingsDep
) -> RunCodeResponse:
    """Compile and run one program in a fresh sandbox container (SandboxFusion's /run_code)."""
    return await service.run_code_capped(request, principal, settings.broker_url)
