"""Fixtures for store tests: a real, freshly migrated database per test.

Every test runs on a SQLite file under ``tmp_path`` and, marked ``slow``, on a fresh
database of a throwaway Postgres server (skipped with the reason when the server
binaries or the driver are missing) - the same models and code on both.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from mindforge.store import LineageCreate, init_db, session_scope
from mindforge.store.lineages import create_generation, create_lineage
from mindforge.store.registry import register_contract

BASELINE_TOML = '[mindforge]\nname = "baseline"\nrevision = "1.0.0"\n'

_database_numbers = itertools.count()

# --- a throwaway Postgres server from the Debian ``postgresql`` binaries ---------------
# It listens on a Unix socket only, in a private temporary directory; as root, it runs
# as the ``postgres`` user (Postgres refuses to run as root).


def find_bin(name: str) -> str | None:
    """Path of a Postgres server binary, on PATH or under ``/usr/lib/postgresql/<v>/bin``."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def unavailable_reason() -> str | None:
    """Why a server cannot be started here, or None when it can."""
    if find_bin("initdb") is None or find_bin("pg_ctl") is None:
        return "Postgres server binaries (initdb, pg_ctl) not installed: apt-get install postgresql"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "no Postgres driver: pip install 'psycopg[binary]'"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser to drop to the postgres user"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and no 'postgres' user to run the server as"
    return None


def _run(argv: list[str]) -> None:
    if os.geteuid() == 0:
        argv = ["runuser", "-u", "postgres", "--", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stdout}\n{done.stderr}")


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server; yield a SQLAlchemy URL prefix ``postgresql+psycopg://...`` without database.

    Yields:
        ``postgresql+psycopg://mindforge@/{database}?host=<socket dir>`` with a
        ``{database}`` placeholder to format.
    """
    base = Path(tempfile.mkdtemp(prefix="mindforge-pg-"))
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(base, entry.pw_uid, entry.pw_gid)
    data, log = base / "data", base / "server.log"
    pg_ctl = find_bin("pg_ctl")
    try:
        _run([find_bin("initdb"), "-D", str(data), "-U", "mindforge", "-A", "trust", "--no-sync", "-E", "UTF8"])
        options = f"-k {base} -c listen_addresses= -F"
        _run([pg_ctl, "-D", str(data), "-o", options, "-l", str(log), "-w", "-t", "60", "start"])
        try:
            yield f"postgresql+psycopg://mindforge@/{{database}}?host={base}"
        finally:
            _run([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"])
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url_template() -> Iterator[str]:
    """URL template (``{database}`` placeholder) of a Postgres server for this session."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    with postgres_server() as template:
        yield template


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of an empty database: a SQLite file in a directory that does not exist yet, or a new Postgres database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'mindforge.db'}"
        return
    template: str = request.getfixturevalue("postgres_url_template")
    name = f"test_{next(_database_numbers)}"
    _admin_sql(template, f"CREATE DATABASE {name}")
    yield template.format(database=name)
    _admin_sql(template, f"DROP DATABASE {name} WITH (FORCE)")  # keeps the throwaway cluster small


def _admin_sql(template: str, sql: str) -> None:
    admin = sa.create_engine(template.format(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(sql)
    finally:
        admin.dispose()


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
