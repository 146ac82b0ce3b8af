"""SQLite's write-ahead log checkpointed in the background, not by a request's commit.

In WAL mode SQLite appends each commit's pages to the log, and by default the commit that
takes the log past 1,000 pages also copies the log into the database file and syncs it (a
checkpoint). On the embedded default a one-item request writes about 30 pages, so every
thirtieth or so request paid 5-15 ms for everyone's writes: its latency, and the p99 of all of
them. The API process runs this thread instead; commits keep a checkpoint of their own only as
a safety net, past `AUTOCHECKPOINT_PAGES` (see `db._configure_sqlite`).

`bench/bench_checkpoint.py` measures both ways in one run. The cost: the log file grows to
what is written between two rounds (tens of MiB under a steady stream of requests, against
4 MiB), and a RESTART round may hold writers back while it waits, at most `RESTART_WAIT_S`,
for a reader of an older snapshot to finish.
"""

from __future__ import annotations

import sqlite3
import threading

import structlog

log = structlog.get_logger(__name__)

#: Log pages past which a commit checkpoints after all (64 MiB of 4 KiB pages), should no
#: background checkpoint run: processes without an API (workers alone) write to a bounded log.
AUTOCHECKPOINT_PAGES = 16_384


#: Log pages past which the background checkpoint makes the log start over (SQLite's own
#: autocheckpoint threshold).
RESTART_PAGES = 1_000

#: How long a RESTART round waits for the write lock and for older readers (its busy timeout).
#: It needs a moment between two writers' transactions, so shorter ones rarely get it.
RESTART_WAIT_S = 0.25


class WalCheckpointer:
    """A daemon thread that checkpoints a SQLite database's log every `every_s` seconds.

    PASSIVE checkpoints wait on no lock: readers and writers go on beside it, and what a reader
    still needs stays in the log for the next round.
    """

    def __init__(self, path: str, every_s: float) -> None:
        self.path = path
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="wal-checkpoint", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after a last checkpoint (the log is short for whoever opens the file next)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def checkpoint(self, connection: sqlite3.Connection) -> None:
        """One round.

        A PASSIVE checkpoint copies what it can while writers go on; but the log starts over
        only once a checkpoint has copied all of it, which a steady writer can put off for
        good (the log grows to the safety limit, whose commit then copies 64 MiB). So once the
        log is long, a RESTART checkpoint follows: it holds writers back while it copies the
        few pages written since the PASSIVE one, and the next commit starts the log over.
        """
        _, in_log, _ = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if in_log >= RESTART_PAGES:
            connection.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()

    def _run(self) -> None:
        connection = sqlite3.connect(self.path, timeout=RESTART_WAIT_S, isolation_level=None)
        try:
            while True:
                stopping = self._stop.wait(self.every_s)
                try:
                    self.checkpoint(connection)
                except sqlite3.Error as exc:  # locked for a moment, or the file went away
                    log.warning("WAL checkpoint failed; trying again", error=str(exc))
                if stopping:
                    return
        finally:
            connection.close()
