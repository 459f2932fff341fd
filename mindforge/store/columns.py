"""Column types shared by the store's tables: aware UTC timestamps, string enums, NUL-free text.

All are portable: SQLite and Postgres see a plain ``DATETIME``/``TIMESTAMP WITH TIME
ZONE``, a ``VARCHAR`` (adding an enum member never needs a migration) and a ``TEXT``/
``VARCHAR``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

#: width of every string-enum column, in characters
ENUM_LENGTH = 32


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend.

    SQLite has no time zone type and hands back naive values; this type stores UTC and
    reattaches ``timezone.utc`` on the way out, so Python code always sees aware UTC.

    Raises:
        ValueError: (wrapped by SQLAlchemy in ``StatementError``) on binding a naive
            datetime, which would be ambiguous.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()}: the store keeps timezone-aware UTC timestamps")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


#: what a NUL character in text from outside is stored as (U+FFFD REPLACEMENT CHARACTER)
NUL_REPLACEMENT = "\ufffd"


class NulFreeText(TypeDecorator[str]):
    """``TEXT`` for text from outside the store (verifier output, model-written edits).

    Postgres text cannot hold a NUL (0x00) character: psycopg refuses the whole INSERT
    with ``DataError``, where SQLite stores it. So on every backend each NUL is stored as
    :data:`NUL_REPLACEMENT`, and both stores hold the same text.
    """

    impl: type[sa.String] = sa.Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else value.replace("\x00", NUL_REPLACEMENT)


class NulFreeString(NulFreeText):
    """:class:`NulFreeText` as ``VARCHAR`` (columns the migrations made ``VARCHAR``)."""

    impl = sa.String


def str_enum(enum_cls: type[StrEnum]) -> sa.Enum:
    """A non-native enum column: ``VARCHAR(32)`` in the database, the enum member in Python.

    Args:
        enum_cls: the ``StrEnum`` whose *values* (not names) are stored.

    Returns:
        A SQLAlchemy ``Enum`` type without a database enum type or CHECK constraint.
    """
    return sa.Enum(
        enum_cls,
        name=_snake(enum_cls.__name__),
        native_enum=False,
        create_constraint=False,
        length=ENUM_LENGTH,
        validate_strings=True,
        values_callable=_values,
    )


def _values(enum_cls: type[StrEnum]) -> list[str]:
    return [member.value for member in enum_cls]


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


def render_type(type_: Any) -> str | None:
    """Alembic ``render_item`` helper: write store-specific types as plain ``sa.`` types.

    Migrations then depend on SQLAlchemy only, not on this module, and string enums
    appear as the ``VARCHAR`` they are.

    Args:
        type_: a column type met during autogenerate.

    Returns:
        Python source for the type, or None to let Alembic render it.
    """
    if isinstance(type_, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    if isinstance(type_, NulFreeText):
        return "sa.Text()" if isinstance(type_.impl, sa.Text) else "sa.String()"
    if isinstance(type_, sa.Enum) and not type_.native_enum:
        # the database sees only VARCHAR: enum members are checked in Python, and new
        # members need no migration
        return f"sa.String(length={type_.length})"
    return None
