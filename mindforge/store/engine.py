"""Engines, sessions and schema migrations.

Nothing connects at import time: callers build an engine with :func:`make_engine` (or
:func:`init_db`, which first brings the schema to the latest migration) and open units
of work with :func:`session_scope`. The Alembic configuration is built in code so that
migrations run from the installed package, without an ``alembic.ini``.
"""

from __future__ import annotations

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
    config.set_main_option("version_path_separator", "os")
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
        command.upgrade(alembic_config(engine=engine), revision)
    finally:
        engine.dispose()


def init_db(url: str) -> Engine:
    """Migrate the database at ``url`` to the latest schema and return an engine for it.

    Args:
        url: SQLAlchemy database URL.

    Returns:
        A new engine from :func:`make_engine`.
    """
    upgrade_db(url)
    return make_engine(url)
