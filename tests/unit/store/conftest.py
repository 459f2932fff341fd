"""Fixtures for store tests: a real, freshly migrated database per test.

Every test runs on a SQLite file under ``tmp_path`` and, marked ``slow``, on a fresh
database of the Postgres test server that ``MINDFORGE_TEST_POSTGRES_URL`` names
(tests/postgres.py: skipped only where the variable is unset; deploy/test.sh sets it) -
the same models and code on both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from mindforge.store import LineageCreate, init_db, session_scope
from mindforge.store.lineages import create_generation, create_lineage
from mindforge.store.registry import register_contract
from tests.postgres import fresh_database

BASELINE_TOML = '[mindforge]\nname = "baseline"\nrevision = "1.0.0"\n'


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of an empty database: a SQLite file in a directory that does not exist yet, or a new Postgres database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'mindforge.db'}"
        return
    with fresh_database(request.getfixturevalue("postgres_admin")) as url:  # tests/conftest.py
        yield url


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """An engine on a freshly migrated database."""
    engine = init_db(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def lineage_id(engine: Engine) -> str:
    """A lineage with a registered baseline contract and generation 0."""
    with session_scope(engine) as session:
        lineage = create_lineage(session=session, lineage_in=LineageCreate(name="demo", spec={"generations": 2}))
        register_contract(
            session=session, name="baseline", revision="1.0.0", content_hash="c0" * 32, toml_text=BASELINE_TOML
        )
        create_generation(session=session, lineage_id=lineage.id, index=0, contract_hash="c0" * 32)
        return lineage.id
