"""Settings, built on demand from environment variables (``MINDFORGE_*``) and an optional TOML file.

Nothing reads settings at import time: call :func:`get_settings` (cached) where needed.
The settings file is ``$MINDFORGE_DATA_DIR/settings.toml`` (written by ``mindforge dev up``
for machine-specific facts such as whether the image map is on); environment variables
win over it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, TypeAdapter, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from mindforge.errors import InputError
from mindforge.tomlfile import read_toml

REPO_ROOT = Path(__file__).resolve().parent.parent
#: the environment variable of settings' ``policy_api_key``
POLICY_API_KEY_ENV = "MINDFORGE_POLICY_API_KEY"


def _default_data_dir() -> Path:
    return REPO_ROOT / ".mindforge"


class Settings(BaseSettings):
    """Where things are and how to reach them.

    Attributes:
        data_dir: root of local state (database, artifacts, dev-stack logs).
        artifact_root: big files (transcripts, logs, adapters); default ``data_dir/artifacts``.
        database_url: SQLAlchemy URL; default a SQLite file under ``data_dir``.
        base_image: tag of the locally built Debian base image.
        image_map_file: TOML file mapping public base images to local ones.
        image_map_enabled: rewrite ``FROM`` lines through the image map (set by
            ``mindforge dev up`` where no registry answers).
        temporal_address: ``host:port`` of the Temporal frontend.
        temporal_namespace: Temporal namespace.
        temporal_ui_url: base URL of the Temporal Web UI.
        ray_address: ``auto``/``ray://...``/``host:port`` of a Ray cluster, or ``local``
            to start an in-process local cluster.
        policy_url: OpenAI-compatible base URL (``.../v1``) of the policy endpoint.
        policy_api_key: the policy endpoint's API key (``MINDFORGE_POLICY_API_KEY``): the
            policy server then answers only requests with ``Authorization: Bearer <key>``,
            and MindForge's clients send it to the policy endpoint. Required to serve
            beyond loopback. A ``SecretStr``: ``repr``, logs and dumps show ``**********``.
        bind_host: the address the dev stack's Temporal dev server and Ray head listen on
            (``MINDFORGE_BIND_HOST``); loopback unless set, e.g. ``0.0.0.0`` to reach them
            from other machines.
        trial_cpus: Ray CPUs one model trial asks for (``MINDFORGE_TRIAL_CPUS``), so a node
            runs ``CPUs / trial_cpus`` trials at once. A trial mostly waits, on the policy
            endpoint and on Docker, so several share a core; the default was chosen by
            ``benchmarks/bench_rollouts.py`` (rollouts a minute by trials at once).
    """

    model_config = SettingsConfigDict(env_prefix="MINDFORGE_", extra="ignore")

    data_dir: Path = Field(default_factory=_default_data_dir)
    artifact_root: Path | None = None
    database_url: str | None = None
    base_image: str = "mindforge/base:bookworm"
    image_map_file: Path = REPO_ROOT / "deploy" / "image_map.toml"
    image_map_enabled: bool = True
    docker_pids_limit: int = Field(default=512, gt=0)
    temporal_address: str = "localhost:7233"
    temporal_namespace: str = "default"
    temporal_ui_url: str = "http://localhost:8233"
    ray_address: str = "local"
    policy_url: str = "http://127.0.0.1:8000/v1"
    policy_api_key: SecretStr | None = None
    bind_host: str = "127.0.0.1"
    trial_cpus: float = Field(default=0.25, gt=0.0, le=64.0)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _FileSource(settings_cls))

    @property
    def artifacts(self) -> Path:
        """Resolved artifact root."""
        return self.artifact_root or self.data_dir / "artifacts"

    @property
    def db_url(self) -> str:
        """Resolved database URL."""
        return self.database_url or f"sqlite:///{self.data_dir / 'mindforge.db'}"

    @property
    def settings_file(self) -> Path:
        """The machine-local settings file."""
        return self.data_dir / "settings.toml"


class _FileSource(PydanticBaseSettingsSource):
    """Reads ``$MINDFORGE_DATA_DIR/settings.toml`` (or the default data dir's)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        """The file's settings, each checked against its field.

        Raises:
            InputError: the file is unreadable, not UTF-8 or not TOML, names an unknown
                setting, or gives one a value of the wrong type or range (naming the key).
        """
        import os

        data_dir = Path(os.environ.get("MINDFORGE_DATA_DIR") or _default_data_dir())
        path = data_dir / "settings.toml"
        if not path.exists() and not path.is_symlink():
            return {}
        data = read_toml(path)
        fields = self.settings_cls.model_fields
        for key, value in data.items():
            if key not in fields:
                raise InputError(path, key[:80], f"unknown setting; the settings are {', '.join(sorted(fields))}")
            try:
                adapter: TypeAdapter[Any] = TypeAdapter(Annotated[fields[key].annotation, fields[key]])  # type: ignore[arg-type]  # a runtime annotation, as pydantic takes it
                adapter.validate_python(value)
            except ValidationError as exc:
                raise InputError(path, key, _reason(exc)) from None
        return data


def _reason(exc: ValidationError) -> str:
    """The first error of ``exc`` in words, the offending value cut to 80 characters."""
    err = exc.errors(include_url=False)[0]
    got = repr(err.get("input"))
    return f"{err['msg']} (got {got if len(got) <= 80 else got[:60] + '...'})"


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings (cached; call ``get_settings.cache_clear()`` after changing env).

    Raises:
        InputError: a bad ``settings.toml`` (naming the file and key) or a bad
            ``MINDFORGE_*`` environment variable (naming the variable).
    """
    try:
        return Settings()
    except ValidationError as exc:
        loc = exc.errors(include_url=False)[0]["loc"]
        name = f"MINDFORGE_{str(loc[0]).upper()}" if loc else "MINDFORGE_*"
        raise InputError("environment", name, _reason(exc)) from None
