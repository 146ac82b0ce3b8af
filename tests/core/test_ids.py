"""Row ids: 32 random hex digits, never the same twice, in threads or in forked processes."""

from __future__ import annotations

import os
import re
import threading

from verifier_service.core.ids import new_id


def test_ids_are_32_hex_digits_and_do_not_repeat() -> None:
    ids = [new_id() for _ in range(5000)]  # several refills of the buffer
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_threads_do_not_hand_out_the_same_id() -> None:
    made: list[list[str]] = [[] for _ in range(4)]

    def make(out: list[str]) -> None:
        out.extend(new_id() for _ in range(2000))

    threads = [threading.Thread(target=make, args=(out,)) for out in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [i for out in made for i in out]
    assert len(set(every)) == len(every) == 8000


def test_a_forked_process_does_not_repeat_its_parents_next_ids() -> None:
    new_id()  # the parent holds unused random bytes now, as a Celery parent may when it forks
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, " ".join(new_id() for _ in range(10)).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    parent = {new_id() for _ in range(10)}
    assert len(child) == 10
    assert not child & parent
