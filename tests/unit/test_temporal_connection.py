"""Temporal as production runs it: TLS, mutual TLS and an API key from settings, refused when half-given.

Pure: the settings and the ``TLSConfig`` built from them; the connection itself runs
against a TLS-only endpoint in ``tests/e2e/test_temporal_tls.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from mindforge.errors import InputError
from mindforge.settings import Settings, get_settings
from workflows.client import connect, tls_config

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _pem(path: Path, text: str = PEM) -> Path:
    path.write_text(text)
    return path


def test_no_tls_setting_means_a_plain_connection() -> None:
    assert tls_config(Settings()) is False


def test_tls_settings_build_the_tls_config(tmp_path: Path) -> None:
    ca, cert = _pem(tmp_path / "ca.pem"), _pem(tmp_path / "c.pem")
    key = _pem(tmp_path / "k.pem", PEM.replace("CERT", "KEY"))
    found = tls_config(Settings(
        temporal_tls_ca_file=ca, temporal_tls_cert_file=cert, temporal_tls_key_file=key,
        temporal_tls_server_name="temporal.internal",
    ))
    assert isinstance(found, TLSConfig)
    assert found.server_root_ca_cert == ca.read_bytes() and found.client_cert == cert.read_bytes()
    assert found.client_private_key == key.read_bytes() and found.domain == "temporal.internal"
    # TLS with the system's CAs: asked for, or implied by an API key (Temporal Cloud)
    assert tls_config(Settings(temporal_tls=True)) == TLSConfig()
    with_key = Settings(temporal_api_key="k")
    assert with_key.temporal_uses_tls and tls_config(with_key) == TLSConfig()


@pytest.mark.parametrize(
    ("env", "variable", "why"),
    [
        ({"MINDFORGE_TEMPORAL_TLS_CERT_FILE": "/c.pem"}, "MINDFORGE_TEMPORAL_TLS_KEY_FILE", "certificate and its key"),
        ({"MINDFORGE_TEMPORAL_TLS_KEY_FILE": "/k.pem"}, "MINDFORGE_TEMPORAL_TLS_KEY_FILE", "certificate and its key"),
        ({"MINDFORGE_TEMPORAL_TLS": "false", "MINDFORGE_TEMPORAL_API_KEY": "sekrit-123"}, "MINDFORGE_TEMPORAL_TLS",
         "MINDFORGE_TEMPORAL_API_KEY need TLS"),
        ({"MINDFORGE_TEMPORAL_TLS": "false", "MINDFORGE_TEMPORAL_TLS_CA_FILE": "/ca.pem"}, "MINDFORGE_TEMPORAL_TLS",
         "MINDFORGE_TEMPORAL_TLS_CA_FILE need TLS"),
        ({"MINDFORGE_DATABASE_URL": "sqlite:///x", "MINDFORGE_DATABASE_URL_FILE": "/u"},
         "MINDFORGE_DATABASE_URL_FILE", "both set"),
    ],
    ids=["cert-without-key", "key-without-cert", "api-key-without-tls", "ca-without-tls", "two-database-urls"],
)
def test_half_given_settings_are_refused_by_name(monkeypatch, env, variable, why) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        with pytest.raises(InputError) as err:
            get_settings()
    finally:
        get_settings.cache_clear()
    assert variable in str(err.value) and why in str(err.value)
    assert "sekrit-123" not in str(err.value)  # the refusal never echoes a key


def test_unreadable_or_non_pem_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="MINDFORGE_TEMPORAL_TLS_CA_FILE.*unreadable"):
        tls_config(Settings(temporal_tls_ca_file=tmp_path / "missing.pem"))
    with pytest.raises(InputError, match="MINDFORGE_TEMPORAL_TLS_CERT_FILE.*not a PEM"):
        tls_config(Settings(temporal_tls_cert_file=_pem(tmp_path / "c.pem", "junk"), temporal_tls_key_file=_pem(
            tmp_path / "k.pem")))


def test_an_api_key_is_never_sent_without_tls() -> None:
    with pytest.raises(InputError, match="over TLS only"):
        asyncio.run(connect("127.0.0.1:1", "default", tls=False, api_key="k"))


def test_the_database_url_can_come_from_a_file(tmp_path: Path) -> None:
    url = _pem(tmp_path / "db", "postgresql+psycopg://mf:pw@db:5432/mf\n")
    assert Settings(database_url_file=url).db_url == "postgresql+psycopg://mf:pw@db:5432/mf"
    with pytest.raises(InputError, match="MINDFORGE_DATABASE_URL_FILE"):
        _ = Settings(database_url_file=tmp_path / "missing").db_url
    with pytest.raises(InputError, match="empty"):
        _ = Settings(database_url_file=_pem(tmp_path / "empty", "\n")).db_url
