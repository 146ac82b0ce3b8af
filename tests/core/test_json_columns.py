"""JSON columns go through orjson (core/jsoncodec.py): what the standard library wrote and read
before must still be written and read the same, on both databases."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from sqlalchemy import JSON, Column, Integer, MetaData, Table, insert, select, text

from verifier_service.core.db import make_engine

ROWS = Table("json_rows", MetaData(), Column("id", Integer, primary_key=True), Column("doc", JSON))


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/json.db"
    return str(request.getfixturevalue("own_pg_url"))


def test_values_orjson_cannot_encode_are_stored_and_read_back(url: str) -> None:
    engine = make_engine(url)
    ROWS.create(engine)
    doc = {
        "big": 2**70,  # beyond 64 bits: orjson refuses it, the standard library writes it
        "components": {"qed": 0.61, "alerts": ["PAINS_A"], "ok": True, "none": None},
        "unicode": "Δ-ß ✓",
        1: "an integer key, read back as a string key as before",
    }
    with engine.begin() as conn:
        conn.execute(insert(ROWS), [{"id": 1, "doc": doc}])
        stored = conn.scalar(select(ROWS.c.doc).where(ROWS.c.id == 1))
    assert stored == {**{k: v for k, v in doc.items() if k != 1}, "1": doc[1]}
    engine.dispose()


def test_a_nan_the_standard_library_wrote_earlier_still_reads(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/old.db")
    ROWS.create(engine)
    with engine.begin() as conn:  # as json.dumps stored it before orjson
        conn.execute(text("INSERT INTO json_rows (id, doc) VALUES (1, '{\"score\": NaN}')"))
        stored = conn.scalar(select(ROWS.c.doc))
    assert math.isnan(stored["score"])
    engine.dispose()
