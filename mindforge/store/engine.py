"""Engines, sessions and schema migrations.

Nothing connects at import time: callers build an engine with :func:`make_engine` (or
:func:`init_db`, which first brings the schema to the latest migration) and open units
of work with :func:`session_scope`. The Alembic configuration is built in code so that
migrations run from the installed package, without an ``alembic.ini``.
"""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

#: how long a SQLite writer waits for a lock before failing, in milliseconds
SQLITE_BUSY_TIMEOUT_MS = 30_000

#: Postgres advisory lock key held while migrating ("mindforge" in ASCII, truncated)
_PG_MIGRATION_LOCK_KEY = 0x6D696E64666F72

_ALEMBIC_LOCK = threading.Lock()


def make_engine(url: str, *, echo: bool = False) -> Engine:
    """Create an engine for ``url`` (SQLite file, in-memory SQLite or Postgres).

    For SQLite the parent directory of the file is created, connections may cross
    threads, and every connection gets WAL journaling (readers do not block the
    writer), a busy timeout of :data:`SQLITE_BUSY_TIMEOUT_MS` and enforced foreign keys,
    so SQLite checks the same constraints Postgres does.

    Args:
        url: SQLAlchemy database URL, e.g. ``sqlite:////abs/path/mindforge.db`` or
            ``postgresql+psycopg://user@host/db``.
        echo: log every SQL statement.

    Returns:
        A new engine (not cached; keep one per process).
    """
    parsed = make_url(url)
    kwargs: dict[str, Any] = {"echo": echo}
    if parsed.get_backend_name() != "sqlite":
        return sa.create_engine(parsed, pool_pre_ping=True, **kwargs)
    database = parsed.database or ""
    in_memory = database in ("", ":memory:") or database.startswith("file::memory:")
    if not in_memory:
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(parsed, connect_args={"check_same_thread": False}, **kwargs)

    @sa.event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        if not in_memory:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One unit of work: commit on normal exit, roll back on an exception.

    Repository functions only flush; the scope commits. Objects stay readable after
    the scope ends (``expire_on_commit=False``).

    Args:
        engine: from :func:`make_engine`.

    Yields:
        A SQLModel session.
    """
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config(url: str | None = None, *, engine: Engine | None = None) -> Config:
    """An Alembic config whose scripts live inside this package.

    To write a new migration after changing the models (from a checkout)::

        from alembic import command
        command.revision(alembic_config("sqlite:////tmp/x.db"), autogenerate=True, message="...")

    against a database already at head, then review the generated file.

    Args:
        url: database URL; ignored when ``engine`` is given.
        engine: an engine to migrate through (it keeps its connect-time settings).

    Returns:
        The config; ``config.attributes["engine"]`` holds the engine migrations use.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    if engine is None:
        if url is None:
            raise ValueError("alembic_config needs a url or an engine")
        engine = make_engine(url)
    config.attributes["engine"] = engine
    return config


def upgrade_db(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision`` (default: the latest), creating it if needed.

    Safe to call on every start: an up-to-date database is left as it is.

    Args:
        url: SQLAlchemy database URL.
        revision: Alembic revision id, or ``"head"``.
    """
    engine = make_engine(url)
    try:
        _upgrade(engine, revision)
    finally:
        engine.dispose()


def _upgrade(engine: Engine, revision: str) -> None:
    # Alembic's ``context``/``op`` proxies are module globals: one migration per process
    with _ALEMBIC_LOCK, _migration_lock(engine):
        command.upgrade(alembic_config(engine=engine), revision)


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """Serialize migrations of one database across processes (workers and CLI start together).

    Alembic takes no lock itself, and SQLite DDL is not transactional under pysqlite,
    so two racing upgrades could both try to create the first table.
    """
    if engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT pg_advisory_lock(:key)"), {"key": _PG_MIGRATION_LOCK_KEY})
            try:
                yield
            finally:
                connection.execute(sa.text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_MIGRATION_LOCK_KEY})
        return
    database = engine.url.database or ""
    if engine.dialect.name != "sqlite" or database in ("", ":memory:") or database.startswith("file:"):
        yield
        return
    with open(f"{database}.migrate.lock", "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def init_db(url: str) -> Engine:
    """Migrate the database at ``url`` to the latest schema and return the engine that did it.

    Works for in-memory SQLite too (``sqlite://``), since the same engine is returned.

    Args:
        url: SQLAlchemy database URL.

    Returns:
        A new engine from :func:`make_engine`; dispose of it when done.
    """
    engine = make_engine(url)
    try:
        _upgrade(engine, "head")
    except BaseException:
        engine.dispose()
        raise
    return engine
