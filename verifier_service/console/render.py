"""The console's pages rendered by the web layer: its templates over `web/templates`."""

from __future__ import annotations

from pathlib import Path

from verifier_service.web.render import Renderer

#: Every console page: `renderer.page(request, settings, "name.html", principal=..., ...)`.
renderer = Renderer(Path(__file__).parent / "templates")
