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

from pydantic import Field, SecretStr, TypeAdapter, ValidationError, ValidationInfo, field_validator
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
#: the settings that make the connection to Temporal TLS (each implies ``temporal_tls``)
TEMPORAL_TLS_SETTINGS = (
    "temporal_api_key", "temporal_tls_ca_file", "temporal_tls_cert_file", "temporal_tls_key_file",
    "temporal_tls_server_name",
)


def _default_data_dir() -> Path:
    return REPO_ROOT / ".mindforge"


class Settings(BaseSettings):
    """Where things are and how to reach them.

    Attributes:
        data_dir: root of local state (database, artifacts, dev-stack logs).
        artifact_root: big files (transcripts, logs, adapters); default ``data_dir/artifacts``.
        database_url: SQLAlchemy URL; default a SQLite file under ``data_dir``.
        database_url_file: a file holding the SQLAlchemy URL (``MINDFORGE_DATABASE_URL_FILE``),
            read when the store is opened: how a URL with a password reaches a worker without
            being in its environment (a Kubernetes Secret mounted as a file, the file
            ``mindforge cluster up`` writes). Not both this and ``database_url``.
        base_image: tag of the locally built Debian base image.
        image_map_file: TOML file mapping public base images to local ones.
        image_map_enabled: rewrite ``FROM`` lines through the image map (set by
            ``mindforge dev up`` where no registry answers).
        temporal_address: ``host:port`` of the Temporal frontend.
        temporal_namespace: Temporal namespace.
        temporal_ui_url: base URL of the Temporal Web UI.
        temporal_api_key: an API key sent to Temporal as ``Authorization: Bearer <key>``
            (``MINDFORGE_TEMPORAL_API_KEY``; Temporal Cloud's API-key authentication); it
            turns TLS on. A ``SecretStr``.
        temporal_tls_ca_file: a PEM file of the CA that signed the Temporal frontend's
            certificate (default: the system's CAs); it turns TLS on.
        temporal_tls_cert_file / temporal_tls_key_file: the client certificate and its key
            (PEM) for mutual TLS; both or neither; they turn TLS on.
        temporal_tls_server_name: the name the frontend's certificate must carry, when it is
            not the host of ``temporal_address`` (also sent as SNI).
        temporal_tls: TLS to Temporal: None (default) turns it on when any setting above is
            given, True with the system's CAs alone; False refuses those settings.
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
            endpoint and on Docker, so several share a core; the default, 1/6 (12 trials at
            once on 2 CPUs), was chosen by ``benchmarks/bench_rollouts.py --slots``: 1.21x the
            rollouts a minute of 8 at once, and 16 at once no faster.
        trial_sandboxes: units of the Ray resource ``sandbox`` one model trial asks for
            (``MINDFORGE_TRIAL_SANDBOXES``). 0 (default) asks for none, for a Ray without it
            (the dev stack's head, a local cluster); 1 where the nodes that run sandboxes
            declare ``sandbox`` slots (``mindforge cluster up``, the KubeRay worker group), so
            a trial lands only on such a node, at most its slots at once.
    """

    model_config = SettingsConfigDict(env_prefix="MINDFORGE_", extra="ignore")

    data_dir: Path = Field(default_factory=_default_data_dir)
    artifact_root: Path | None = None
    database_url: str | None = None
    database_url_file: Path | None = Field(default=None, validate_default=True)
    base_image: str = "mindforge/base:bookworm"
    image_map_file: Path = REPO_ROOT / "deploy" / "image_map.toml"
    image_map_enabled: bool = True
    docker_pids_limit: int = Field(default=512, gt=0)
    temporal_address: str = "localhost:7233"
    temporal_namespace: str = "default"
    temporal_ui_url: str = "http://localhost:8233"
    temporal_api_key: SecretStr | None = None
    temporal_tls_ca_file: Path | None = None
    temporal_tls_cert_file: Path | None = None
    temporal_tls_key_file: Path | None = Field(default=None, validate_default=True)
    temporal_tls_server_name: str | None = None
    temporal_tls: bool | None = Field(default=None, validate_default=True)
    ray_address: str = "local"
    policy_url: str = "http://127.0.0.1:8000/v1"
    policy_api_key: SecretStr | None = None
    bind_host: str = "127.0.0.1"
    trial_cpus: float = Field(default=1 / 6, gt=0.0, le=64.0)
    trial_sandboxes: float = Field(default=0.0, ge=0.0, le=64.0)

    @field_validator("database_url_file")
    @classmethod
    def _one_database_url(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is not None and info.data.get("database_url"):
            raise ValueError("MINDFORGE_DATABASE_URL and MINDFORGE_DATABASE_URL_FILE are both set; set one")
        return value

    @field_validator("temporal_tls_key_file")
    @classmethod
    def _cert_with_key(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if (info.data.get("temporal_tls_cert_file") is None) != (value is None):
            raise ValueError(
                "mutual TLS needs the client certificate and its key: set both MINDFORGE_TEMPORAL_TLS_CERT_FILE "
                "and MINDFORGE_TEMPORAL_TLS_KEY_FILE, or neither"
            )
        return value

    @field_validator("temporal_tls")
    @classmethod
    def _tls_for_tls_settings(cls, value: bool | None, info: ValidationInfo) -> bool | None:
        given = [f"MINDFORGE_{k.upper()}" for k in TEMPORAL_TLS_SETTINGS if info.data.get(k) is not None]
        if value is False and given:
            raise ValueError(
                f"MINDFORGE_TEMPORAL_TLS is false but {', '.join(given)} need TLS (a key or client certificate "
                "is never sent in clear text); unset them or MINDFORGE_TEMPORAL_TLS"
            )
        return value

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
        """Resolved database URL: ``database_url``, else ``database_url_file``'s content, else the SQLite file.

        Raises:
            InputError: ``database_url_file`` cannot be read or is empty.
        """
        if self.database_url_file is not None:
            try:
                url = self.database_url_file.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(self.database_url_file, "MINDFORGE_DATABASE_URL_FILE", f"unreadable: {exc}") from None
            if not url:
                raise InputError(self.database_url_file, "MINDFORGE_DATABASE_URL_FILE", "the file is empty")
            return url
        return self.database_url or f"sqlite:///{self.data_dir / 'mindforge.db'}"

    @property
    def temporal_uses_tls(self) -> bool:
        """Whether the connection to Temporal is TLS (``temporal_tls``, or implied by a TLS setting or API key)."""
        if self.temporal_tls is not None:
            return self.temporal_tls
        return any(getattr(self, k) is not None for k in TEMPORAL_TLS_SETTINGS)

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
