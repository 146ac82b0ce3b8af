"""Log setup: plain tracebacks without local variables, and no secrets in any line.

structlog's default renders exceptions with rich and every frame's locals: the request, the
settings and the database URL with its password, megabytes per error, while the event loop
waits. Here exceptions render as the standard library's traceback, and URLs lose their passwords.
"""

from __future__ import annotations

import logging
import re
from collections.abc import MutableMapping
from typing import Any

import structlog

# scheme://user:password@host -> scheme://user:***@host (any scheme: postgresql+psycopg, redis, ...)
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:)[^\s@/]+@")


def mask_secrets(text: str) -> str:
    """`text` with the password of every URL in it replaced by ***."""
    return _URL_PASSWORD.sub(r"\g<head>***@", text)


def _mask_event(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in event_dict.items():
        if isinstance(value, str):
            event_dict[key] = mask_secrets(value)
    return event_dict


class MaskingFormatter(logging.Formatter):
    """Wraps a formatter: its output, tracebacks included, with URL passwords masked."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        return mask_secrets(self.inner.format(record))


def configure_logging(level: str = "INFO", *, json: bool = False) -> None:
    """Render structlog events through the standard library's traceback (no locals), mask URL
    passwords in them and in every stdlib handler installed so far (uvicorn's among them); with
    `json`, one JSON object per line. Idempotent."""
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,  # traceback.format_exception: no locals
            _mask_event,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
        ),
        cache_logger_on_first_use=False,  # loggers follow sys.stdout when it is swapped
    )
    loggers = [logging.getLogger(), *(
        logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
    )]  # fmt: skip
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            if not isinstance(handler.formatter, MaskingFormatter):
                handler.setFormatter(MaskingFormatter(handler.formatter))
