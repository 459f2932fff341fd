"""The Postgres test server's variable: unset skips, set but unanswered fails (never a skip)."""

from __future__ import annotations

import pytest

from tests.conftest import free_port
from tests.postgres import POSTGRES_URL_VAR, postgres_admin_url


def test_an_unset_variable_skips_naming_the_script(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(POSTGRES_URL_VAR, raising=False)
    with pytest.raises(pytest.skip.Exception, match="install_postgres.sh"):
        postgres_admin_url()


def test_a_server_that_does_not_answer_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(POSTGRES_URL_VAR, f"postgresql+psycopg://mindforge:pw@127.0.0.1:{free_port()}/mindforge_test")
    with pytest.raises(pytest.fail.Exception, match=f"{POSTGRES_URL_VAR}: no Postgres server answers"):
        postgres_admin_url()


def test_a_url_of_another_database_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(POSTGRES_URL_VAR, "sqlite:///tmp/x.db")
    with pytest.raises(pytest.fail.Exception, match="'sqlite' is not a Postgres URL"):
        postgres_admin_url()
