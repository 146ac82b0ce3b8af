"""The console's path and query parameters, shared by its pages and its JSON API (so that no
pages module imports an endpoint module)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Form, Path, Query

from verifier_service.console.overview.schemas import Window

#: A job's id in a path.
JobId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="A job's id.")]
#: A queue's name in a path.
QueueName = Annotated[str, Path(pattern=r"^[a-z][a-z.]{0,31}$", description="A queue's name.")]
#: A worker's node name in a path (`name@host`).
NodeName = Annotated[
    str, Path(pattern=r"^[A-Za-z0-9_.@-]{1,255}$", description="A worker's node name.")
]
#: The time window of the overview and the calibration.
WindowQuery = Annotated[Window, Query(description="The time window: 1h, 24h or 7d.")]
#: The calibration's upper score counted as good.
ThresholdQuery = Annotated[
    float | None,
    Query(ge=0, le=1, description="Upper score counted as good (default: the gate's own)."),
]
#: Which version of a policy, in a query.
VersionQuery = Annotated[int, Query(ge=1, le=2**31 - 1, description="A policy version number.")]
#: A version number in a page's query (the compare form, the editor's starting version).
OptionalVersion = Annotated[int | None, Query(ge=1, le=2**31 - 1)]
#: How many of the policy's latest stored items a replay runs over.
ReplayLimit = Annotated[
    int, Query(ge=1, le=5000, description="Most stored items to replay (the latest ones).")
]
#: The draft editor's text field.
DraftText = Annotated[str, Form(max_length=200_000)]
