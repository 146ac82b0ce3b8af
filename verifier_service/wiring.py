"""Start-up wiring: what every process that may run a tier does once before it serves.

The one place that hands the tier families their settings and installs the service's hooks into
them. The API (`app.py`), the Celery workers (`workers/celery_app.py`) and the CLI's commands
call it; `settings.py` stays a leaf that imports no domain.
"""

from __future__ import annotations

from tiers.registry import configure
from verifier_service.oracle.hooks import install_oracle_tier
from verifier_service.review.hooks import install_review_tier
from verifier_service.settings import Settings, get_settings


def configure_tiers(settings: Settings | None = None) -> None:
    """Hand the tier families their groups of `settings` (default: this process's).

    The tiers never read the service's settings themselves.
    """
    settings = settings or get_settings()
    configure(
        {
            "code": settings.sandbox,
            "chem": settings.chem,
            "answer": settings.answer,
            "judge": settings.judge,
            "oracle": settings.oracles,
        }
    )
    install_review_tier()  # the `human` tier's work goes to the review queue
    install_oracle_tier()  # the `oracle` tier's work goes to the oracle domain
