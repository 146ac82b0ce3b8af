"""The static files of every app, served from one declared route, `GET /static/{path}`.

`app.py` names the directories once; a file is looked up in them in order. The route declares
its access like every other (public: stylesheets, scripts and the vendored Chart.js hold no
data), so the route walk sees it. Nothing is fetched from another site: users may be offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fastapi import APIRouter, params
from fastapi.responses import FileResponse

from verifier_service.core.errors import NotFoundError

#: The layer's own files: base.css and vendor/chart.umd.min.js (Chart.js, MIT).
STATIC = Path(__file__).parent / "static"

MEDIA_TYPES = {
    ".css": "text/css",
    ".js": "text/javascript",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".woff2": "font/woff2",
}


def _files(directory: Path) -> set[str]:
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()}


def static_router(
    directories: Sequence[Path], *, dependencies: Sequence[params.Depends]
) -> APIRouter:
    """One `GET /static/{path}` route over `directories` (a name may be in only one of them)."""
    roots = [d.resolve() for d in directories]
    seen: dict[str, Path] = {}
    for root in roots:
        for name in _files(root):
            if name in seen:
                raise ValueError(f"static file {name} is in both {seen[name]} and {root}")
            seen[name] = root
    router = APIRouter(tags=["static"], include_in_schema=False)

    @router.get("/static/{path:path}", dependencies=list(dependencies))
    def static_file(path: str) -> FileResponse:
        """A stylesheet, script or image of the pages (cached by the browser, revalidated)."""
        for root in roots:
            candidate = (root / path).resolve()
            if candidate.is_relative_to(root) and candidate.is_file():
                media_type = MEDIA_TYPES.get(candidate.suffix, "application/octet-stream")
                response = FileResponse(candidate, media_type=media_type)
                response.headers["X-Content-Type-Options"] = "nosniff"
                response.headers["Cache-Control"] = "no-cache"
                return response
        raise NotFoundError(f"no static file {path}", hint="see the page's own links")

    return router
