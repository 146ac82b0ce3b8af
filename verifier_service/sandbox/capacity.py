"""How many `/run_code` runs may be in flight: per key (in Redis, so every API process counts
the same runs) and in all (per API process), and the thread pool of their own they run on.

A run holds a worker thread for as long as its container runs (up to minutes). On the thread
pool that FastAPI's sync routes share, a few dozen slow runs from one trainer would leave no
thread for anyone else's requests; on a pool of their own, at most `run_code_concurrency`
threads wait on containers and the other routes never notice.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import redis
import structlog

from verifier_service.core.notify import sync_client
from verifier_service.sandbox.errors import RunCodeBusyError

log = structlog.get_logger(__name__)
T = TypeVar("T")

# A counting semaphore: a sorted set of the runs in flight, each scored with the time its lease
# ends (a process that died mid-run frees its slot then). Redis's clock, so processes agree.
_TAKE_SLOT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease_ms = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + lease_ms, ARGV[2])
if redis.call('PTTL', KEYS[1]) < lease_ms + 1000 then
  redis.call('PEXPIRE', KEYS[1], lease_ms + 1000)
end
return 1
"""


class KeySlots:
    """Runs in flight per key (or per signed-in person), across the API's processes."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._take = client.register_script(_TAKE_SLOT)

    @staticmethod
    def _key(owner: str) -> str:
        return f"verifier:run_code:slots:{owner}"

    def take(self, owner: str, cap: int, lease_s: float) -> str | None:
        """A slot of `owner`'s `cap` (its token), held until given back or `lease_s` passes;
        None when all are taken. Without Redis the cap is not checked (as rate limits)."""
        token = uuid.uuid4().hex
        try:
            taken = self._take(keys=[self._key(owner)], args=[cap, token, int(lease_s * 1000)])
        except redis.RedisError:
            log.warning("run_code per-key cap not checked: Redis unavailable")
            return token
        return token if int(taken) else None

    def give_back(self, owner: str, token: str) -> None:
        try:
            self.client.zrem(self._key(owner), token)
        except redis.RedisError:
            log.warning("run_code slot not given back: Redis unavailable; it frees at its lease")


class RunPool:
    """At most `size` runs in flight in this process, each on a thread of this pool's own;
    one more is refused at once (429) rather than queued behind minutes of containers."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.in_flight = 0
        self._lock = threading.Lock()  # runs end on the pool's threads
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="run_code")

    def admit(self) -> None:
        """Take a place for one run (429 when all are taken); `run` gives it back."""
        with self._lock:
            if self.in_flight >= self.size:
                raise RunCodeBusyError(
                    f"this API process runs at most {self.size} /run_code programs at once",
                    cap="overall", limit=self.size,
                )  # fmt: skip
            self.in_flight += 1

    def _release(self) -> None:
        with self._lock:
            self.in_flight -= 1

    async def run(self, work: Callable[[], T]) -> T:
        """`work` on this pool (its place taken with `admit`). The place is given back when the
        work ends, not when the request stops waiting: a client that hangs up does not free
        a place its container still holds."""
        context = contextvars.copy_context()  # structlog's and the tracer's context
        try:
            future = self._executor.submit(context.run, work)
        except BaseException:
            self._release()
            raise
        future.add_done_callback(lambda _: self._release())
        return await asyncio.wrap_future(future)


@functools.lru_cache(maxsize=4)
def key_slots(broker_url: str) -> KeySlots:
    """The per-key counts in the broker's Redis."""
    return KeySlots(sync_client(broker_url))


@functools.lru_cache(maxsize=4)
def run_pool(size: int) -> RunPool:
    """This process's pool of `/run_code` runs."""
    return RunPool(size)
