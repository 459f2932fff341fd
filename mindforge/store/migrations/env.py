"""Alembic environment: migrate through the engine handed over in ``config.attributes``.

Built by :func:`mindforge.store.engine.alembic_config`; there is no ``alembic.ini``.
On SQLite, migrations run in batch mode (table copy) with foreign keys switched off for
the duration, as Alembic's batch-mode documentation advises.
"""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from sqlmodel import SQLModel
from sqlmodel.sql.sqltypes import AutoString

import mindforge.store.models  # noqa: F401  (registers the tables on SQLModel.metadata)
from mindforge.store.columns import render_type

target_metadata = SQLModel.metadata


def _render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    if type_ != "type":
        return False
    if isinstance(obj, AutoString):
        return "sa.String()"
    return render_type(obj) or False


def _configure(**kwargs: Any) -> None:
    context.configure(
        target_metadata=target_metadata,
        compare_type=True,
        render_item=_render_item,
        **kwargs,
    )


def run_migrations_offline() -> None:
    """Emit SQL to stdout instead of executing it (``alembic upgrade --sql``)."""
    engine = context.config.attributes["engine"]
    _configure(url=engine.url, literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run the migrations on a connection of the configured engine."""
    engine = context.config.attributes["engine"]
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as connection:
        if sqlite:
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        try:
            _configure(connection=connection, render_as_batch=sqlite)
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
        finally:
            if sqlite:
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                connection.commit()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
