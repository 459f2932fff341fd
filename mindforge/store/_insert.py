"""Insert-if-absent, the store's one idempotency primitive.

``INSERT ... ON CONFLICT DO NOTHING`` is atomic on SQLite (3.24+) and Postgres alike:
two workers racing to store the same key both succeed and exactly one row results,
with no exception poisoning the session (a savepoint-and-retry would need pysqlite's
transaction workaround).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, SQLModel

from mindforge.store.errors import StoreError

#: per dialect, its INSERT construct (both have ``on_conflict_do_nothing``)
_INSERTS: dict[str, Callable[[Any], sqlite.Insert | postgresql.Insert]] = {
    "sqlite": sqlite.insert,
    "postgresql": postgresql.insert,
}


def insert_ignore(session: Session, row: SQLModel) -> bool:
    """Insert ``row`` unless a row with the same primary key or unique key exists.

    Pending ORM changes are flushed first, so ``row`` may reference them. Foreign key
    and NOT NULL violations still raise.

    Args:
        session: the unit of work.
        row: an unsaved table-model instance (its defaults already filled).

    Returns:
        True when the row was inserted, False when a conflicting row already existed.

    Raises:
        StoreError: the database is neither SQLite nor Postgres.
        sqlalchemy.exc.IntegrityError: another constraint failed.
    """
    bind = session.get_bind()
    insert = _INSERTS.get(bind.dialect.name)
    if insert is None:
        raise StoreError(f"unsupported database dialect {bind.dialect.name!r}: use SQLite or Postgres")
    table = type(row).__table__  # type: ignore[attr-defined]  # set on table=True models; SQLModel does not declare it
    values = {column.name: getattr(row, column.name) for column in table.columns}
    statement = insert(table).values(**values).on_conflict_do_nothing()
    # rowcount of an INSERT is only kept when asked for (SQLAlchemy 2.0.28+)
    result = session.exec(statement.execution_options(preserve_rowcount=True))
    return result.rowcount == 1
