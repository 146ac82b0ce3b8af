"""Metrics read from the broker at scrape time: queue lengths and live workers, as the Celery
exporter names them (`celery_queue_length{queue_name}`, `celery_worker_up{hostname}`)."""

from __future__ import annotations

from collections.abc import Iterator

import redis
import structlog
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from verifier_service.core.broker import QUEUES
from verifier_service.core.notify import sync_client
from verifier_service.core.presence import live_nodes

log = structlog.get_logger(__name__)

#: Celery's Redis transport keeps a queue's messages of priority p > 0 in a list of this name.
_PRIORITY_SEP = "\x06\x16"
_PRIORITY_STEPS = (3, 6, 9)


class BrokerCollector(Collector):
    """Queue lengths from the Redis lists of the queues, live workers from their presence
    entries (verifier_service.core.presence). A broker that cannot be reached yields
    `celery_broker_up 0` and nothing else, never an error of the scrape."""

    def __init__(self, broker_url: str) -> None:
        self.broker_url = broker_url

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("celery_broker_up", "Whether the broker answered this scrape.")
        try:
            client = sync_client(self.broker_url)
            pipe = client.pipeline(transaction=False)
            for queue in QUEUES:
                pipe.llen(queue)
                for step in _PRIORITY_STEPS:
                    pipe.llen(f"{queue}{_PRIORITY_SEP}{step}")
            lengths = pipe.execute()
            nodes = live_nodes(client, QUEUES)
        except (redis.RedisError, OSError) as exc:
            log.warning("metrics: broker unreachable at scrape", error=str(exc))
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        per_queue = len(_PRIORITY_STEPS) + 1
        length = GaugeMetricFamily(
            "celery_queue_length", "Messages waiting in a queue.", labels=["queue_name"]
        )
        for index, queue in enumerate(QUEUES):
            chunk = lengths[index * per_queue : (index + 1) * per_queue]
            length.add_metric([queue], float(sum(int(n) for n in chunk)))
        yield length
        workers = GaugeMetricFamily(
            "celery_worker_up",
            "1 for each worker whose presence heartbeat is live (a worker that stops beating "
            "leaves the series within ~15 s).",
            labels=["hostname"],
        )
        for node in sorted(nodes):
            workers.add_metric([node], 1)
        yield workers
