"""The service the console tests share: its own database and Redis, and two jobs (two
trainers, one of them sending the other's molecules again) already run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from console_support import Console, private_console, two_trainers_ran


@pytest.fixture(scope="package")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """The package's console: modules add jobs, policies and reviewers to it as they need."""
    with private_console(tmp_path_factory, "console") as state:
        yield two_trainers_ran(state)


@pytest.fixture(scope="package")
def counted_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """A console nothing is added to: the modules that compare its numbers with exactly the two
    trainers' jobs (test_console_api, test_console_browser) use it whatever ran before them."""
    with private_console(tmp_path_factory, "counted-console") as state:
        yield two_trainers_ran(state)
