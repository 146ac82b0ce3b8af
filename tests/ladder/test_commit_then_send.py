"""`dispatch.commit_then_send`, the one way ladder work leaves a transaction: tier tasks reach
the broker only after the commit that made their rows visible, never from a transaction that
failed, once when the transaction is tried again, and a broker that is away leaves them in the
outbox for the sweeper. `send_on_commit` does the same for a session the caller commits."""

from __future__ import annotations

import pytest
import redis
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from verifier_service.core.broker import celery_app
from verifier_service.core.db import get_sessionmaker, transaction
from verifier_service.core.notify import CHANNEL_PREFIX, sync_client
from verifier_service.core.outbox import OutboxMessage
from verifier_service.ladder import dispatch
from verifier_service.ladder.results import Dispatch, LadderResult
from verifier_service.settings import get_settings

QUEUE = "tier.fast"  # chem.fast's queue: no worker consumes it in these tests


@pytest.fixture
def broker(ladder_db: str) -> redis.Redis:
    return sync_client(get_settings().broker_url)


def _work(job_id: str = "job-1") -> LadderResult:
    return LadderResult(
        dispatches=[Dispatch("chem.fast", "molecule", 0, (f"{job_id}-item",))],
        finished_jobs={job_id},
    )


def _queued(broker: redis.Redis) -> int:
    return int(broker.llen(QUEUE))


def _in_outbox() -> int:
    with transaction() as session:
        return int(session.scalar(select(func.count()).select_from(OutboxMessage)) or 0)


def test_the_work_is_sent_after_the_commit_and_its_job_woken(broker: redis.Redis) -> None:
    before = _queued(broker)
    woken = broker.pubsub()
    woken.subscribe(CHANNEL_PREFIX + "job-1")
    woken.get_message(timeout=1)  # the subscription's confirmation

    def work(session: Session) -> str:
        dispatch.stage(session, _work())
        assert _queued(broker) == before  # staged, not sent: the rows are not visible yet
        return "done"

    assert dispatch.commit_then_send(work) == "done"
    assert _queued(broker) == before + 1
    assert _in_outbox() == 0  # sent, so no longer waiting for the sweeper
    message = woken.get_message(timeout=2)
    assert message is not None
    assert message["data"] == b"finished"
    woken.close()


def test_a_transaction_that_fails_sends_nothing(broker: redis.Redis) -> None:
    before = _queued(broker)

    def work(session: Session) -> None:
        dispatch.stage(session, _work())
        raise ValueError("the pass found something wrong")

    with pytest.raises(ValueError, match="something wrong"):
        dispatch.commit_then_send(work)
    assert _queued(broker) == before
    assert _in_outbox() == 0


def test_a_dropped_connection_runs_the_work_again_and_sends_it_once(broker: redis.Redis) -> None:
    before = _queued(broker)
    tries: list[int] = []

    def work(session: Session) -> int:
        dispatch.stage(session, _work())
        tries.append(1)
        if len(tries) == 1:
            raise OperationalError("SELECT 1", None, ConnectionError("server closed"))
        return len(tries)

    assert dispatch.commit_then_send(work, retries=2, first_delay_s=0.01) == 2
    assert _queued(broker) == before + 1
    assert _in_outbox() == 0


def test_a_broker_that_is_away_leaves_the_work_in_the_outbox(
    ladder_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFIER_BROKER__URL", "redis://127.0.0.1:1/0")  # nothing listens
    get_settings.cache_clear()
    celery_app.cache_clear()
    dispatch.commit_then_send(lambda session: dispatch.stage(session, _work()))
    assert _in_outbox() == 1  # committed: the sweeper sends it when the broker is back


def test_a_request_session_sends_at_its_commit_not_at_a_savepoint(broker: redis.Redis) -> None:
    before = _queued(broker)
    session = get_sessionmaker()()
    try:
        with session.begin():
            dispatch.stage(session, _work())
            dispatch.send_on_commit(session)
            with session.begin_nested():  # a savepoint released: not the commit
                pass
            assert _queued(broker) == before
        assert _queued(broker) == before + 1

        def rolled_back() -> None:
            with session.begin():
                dispatch.stage(session, _work("job-2"))
                raise ValueError("rolled back")

        with pytest.raises(ValueError, match="rolled back"):
            rolled_back()
        with session.begin():  # the next transaction of the session stages nothing
            pass
        assert _queued(broker) == before + 1
    finally:
        session.close()
    assert _in_outbox() == 0
