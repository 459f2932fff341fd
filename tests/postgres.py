"""A fresh Postgres database per test, on the server named by ``MINDFORGE_TEST_POSTGRES_URL``.

``deploy/install_postgres.sh`` installs and starts that server and prints its URL;
``deploy/test.sh`` exports it, so in CI the variable is always set and a server that does
not answer fails the Postgres tests. Only where the variable is unset (a developer's run
of a few tests) are they skipped, with the command that sets it as the reason.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url

#: the variable that holds the URL of a database on the test server, whose role may create databases
POSTGRES_URL_VAR = "MINDFORGE_TEST_POSTGRES_URL"

_numbers = itertools.count()


def postgres_admin_url() -> URL:
    """The test server's URL from :data:`POSTGRES_URL_VAR`, checked to answer.

    Returns:
        The parsed URL (its database is the one the role may connect to when creating others).

    Raises:
        pytest.skip.Exception: the variable is unset.
        pytest.fail.Exception: the URL is not a Postgres URL, or no server answers at it.
    """
    raw = os.environ.get(POSTGRES_URL_VAR, "")
    if not raw:
        pytest.skip(f"{POSTGRES_URL_VAR} is unset: export {POSTGRES_URL_VAR}=\"$(bash deploy/install_postgres.sh)\"")
    url = make_url(raw)
    if url.get_backend_name() != "postgresql":
        pytest.fail(f"{POSTGRES_URL_VAR}: {url.get_backend_name()!r} is not a Postgres URL", pytrace=False)
    try:
        _admin_sql(url, "SELECT 1")
    except sa.exc.OperationalError as exc:
        pytest.fail(f"{POSTGRES_URL_VAR}: no Postgres server answers at {url!r}: {exc.orig}", pytrace=False)
    return url


@contextmanager
def fresh_database(admin_url: URL) -> Iterator[str]:
    """Create an empty database on the test server, yield its URL, drop it afterwards.

    Names carry the process id, so concurrent test sessions on one server never meet.

    Args:
        admin_url: from :func:`postgres_admin_url`.

    Yields:
        A SQLAlchemy URL string of the new database, password included.
    """
    name = f"mindforge_t{os.getpid()}_{next(_numbers)}"
    _admin_sql(admin_url, f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        _admin_sql(admin_url, f'DROP DATABASE "{name}" WITH (FORCE)')  # keeps the test server small


def _admin_sql(url: URL, sql: str) -> None:
    # CREATE/DROP DATABASE cannot run inside a transaction block
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(sql)
    finally:
        admin.dispose()
