"""A process about to take a queue's work loads its tiers' tables first (workers before their
pool forks, the API before the inline lane's first request): the first batch after a start is
not the one that loads RDKit's SA fragment table (~0.5 s)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_warm_up_loads_the_fast_queue_tiers_tables_and_only_theirs() -> None:
    # In a process of its own: nothing loaded by earlier tests.
    script = textwrap.dedent(
        """
        from rdkit.Contrib.SA_Score import sascorer
        from tiers.registry import warm_up

        assert warm_up({"tier.sandbox"}) == []  # no tier of that queue has tables to load
        assert sascorer._fscores is None
        assert warm_up({"tier.fast"}) == ["chem.fast"]
        assert sascorer._fscores is not None, "the SA fragment table is still to load"
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
