"""What of the worker's environment a Ray task may see: an allow-list, and no secret in it."""

from __future__ import annotations

from pydantic import SecretStr

from mindforge.settings import Settings
from workers.main import RAY_TASK_ENV, ray_task_env

#: settings that hold a secret or name a file of one (a URL with a password, a key, a private key)
SECRET_SETTINGS = {"database_url", "database_url_file", "temporal_tls_key_file", "temporal_tls_cert_file"}


def _secret_fields() -> set[str]:
    found = set(SECRET_SETTINGS)
    for name, field in Settings.model_fields.items():
        if "SecretStr" in str(field.annotation) or field.annotation is SecretStr:
            found.add(name)
    return found


def test_every_allowed_variable_is_a_setting_and_none_is_a_secret() -> None:
    names = {f"MINDFORGE_{n.upper()}": n for n in Settings.model_fields}
    assert set(RAY_TASK_ENV) <= names.keys()
    secrets = _secret_fields()
    assert {"policy_api_key", "temporal_api_key", "database_url"} <= secrets
    assert not {names[v] for v in RAY_TASK_ENV} & secrets


def test_only_the_allowed_variables_travel() -> None:
    environ = {
        "MINDFORGE_DATA_DIR": "/d", "MINDFORGE_ARTIFACT_ROOT": "/a", "MINDFORGE_TRIAL_SANDBOXES": "1",
        "MINDFORGE_DATABASE_URL": "postgresql+psycopg://u:hunter2@db/mf", "MINDFORGE_POLICY_API_KEY": "sk-1",
        "MINDFORGE_TEMPORAL_API_KEY": "tk-1", "MINDFORGE_DATABASE_URL_FILE": "/run/secrets/db", "HOME": "/root",
    }
    assert ray_task_env(environ) == {
        "MINDFORGE_DATA_DIR": "/d", "MINDFORGE_ARTIFACT_ROOT": "/a", "MINDFORGE_TRIAL_SANDBOXES": "1",
    }
