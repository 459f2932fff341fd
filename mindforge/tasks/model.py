"""Pydantic models of a task in the Terminal-Bench 2 / Harbor layout (see docs/tasks.md).

Field names and defaults follow Harbor's ``task.toml`` (``src/harbor/models/task/config.py``),
including the schema 1.3/1.4 additions. Unknown keys are kept in ``extra`` and warned
about by the loader; a known key with a wrong type or value is an error.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, field_validator

from mindforge.tasks.dockerfile import InstanceStep


class NetworkMode(StrEnum):
    """Sandbox network access during the agent phase."""

    NO_NETWORK = "no-network"
    PUBLIC = "public"
    ALLOWLIST = "allowlist"


class EnvironmentMode(StrEnum):
    """Where the verifier runs: ``shared`` = in the agent's container (as in Terminal-Bench)."""

    SHARED = "shared"
    SEPARATE = "separate"


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class MetadataConfig(_Section):
    """``[metadata]``: free-form description (difficulty, category, tags)."""

    difficulty: str = "unknown"
    category: str = "uncategorized"
    tags: list[str] = Field(default_factory=list)


class TaskInfoConfig(_Section):
    """``[task]`` (schema 1.3+): name, version, description, authors."""

    name: str = ""
    version: str = ""
    description: str = ""
    authors: list[Any] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class VerifierConfig(_Section):
    """``[verifier]``: timeout in seconds; ``environment_mode`` shared = tests run in the agent's container."""

    timeout_sec: PositiveFloat = 600.0
    user: str | None = None
    environment_mode: EnvironmentMode = EnvironmentMode.SHARED
    env: dict[str, str] = Field(default_factory=dict)


class AgentConfig(_Section):
    """``[agent]``: the agent phase's wall-clock limit in seconds."""

    timeout_sec: PositiveFloat = 600.0
    user: str | None = None


class EnvironmentConfig(_Section):
    """``[environment]``: build limit (seconds) and container resources (cpus, MB)."""

    build_timeout_sec: PositiveFloat = 600.0
    cpus: PositiveFloat = 1
    memory_mb: PositiveInt = 2048
    storage_mb: PositiveInt = 10240
    gpus: int = Field(default=0, ge=0)
    network_mode: NetworkMode = NetworkMode.NO_NETWORK
    allowed_hosts: list[str] = Field(default_factory=list)
    docker_image: str | None = None
    workdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("workdir")
    @classmethod
    def _workdir_inside(cls, value: str | None) -> str | None:
        """The sandbox's working directory: an absolute container path without ``..``."""
        if value is not None and (not value.startswith("/") or ".." in PurePosixPath(value).parts):
            raise ValueError("must be an absolute path in the sandbox without '..' (e.g. /app)")
        return value


class SolutionConfig(_Section):
    """``[solution]``: environment variables of the reference solution."""

    env: dict[str, str] = Field(default_factory=dict)


class TaskConfig(_Section):
    """The whole ``task.toml``."""

    version: str = "1.0"
    schema_version: str | None = None
    task: TaskInfoConfig = Field(default_factory=TaskInfoConfig)
    metadata: MetadataConfig = Field(default_factory=MetadataConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    solution: SolutionConfig = Field(default_factory=SolutionConfig)


class Task(BaseModel):
    """A loaded, checked task directory.

    Attributes:
        id: the task id (directory name).
        path: absolute path of the task directory.
        config: the parsed ``task.toml``.
        instruction: ``instruction.md`` verbatim.
        content_hash: sha256 (hex) over every file's relative path and bytes; image
            builds are cached by it.
        warnings: non-fatal findings (unknown keys kept, ...), each naming file and key.
        instance_steps: the ``COPY``/``RUN`` steps below the Dockerfile's instance-steps
            marker (:mod:`mindforge.tasks.dockerfile`), run in the sandbox when it starts;
            empty for a Dockerfile without the marker (the whole image is built per task).
        shared_dockerfile: the Dockerfile's lines above the marker (the shared image's
            Dockerfile); ``""`` without the marker.
        env_hash: :func:`mindforge.tasks.dockerfile.shared_env_hash` of the shared image
            (``""`` without the marker).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    path: Path
    config: TaskConfig
    instruction: str
    content_hash: str
    warnings: list[str] = Field(default_factory=list)
    instance_steps: tuple[InstanceStep, ...] = ()
    shared_dockerfile: str = ""
    env_hash: str = ""

    @property
    def environment_dir(self) -> Path:
        """Docker build context (``environment/``)."""
        return self.path / "environment"

    @property
    def dockerfile(self) -> Path:
        """``environment/Dockerfile``."""
        return self.environment_dir / "Dockerfile"

    @property
    def tests_dir(self) -> Path:
        """``tests/``: copied to ``/tests`` only after the agent phase."""
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path:
        """``solution/``: the reference solution, run by the oracle agent only."""
        return self.path / "solution"

    @property
    def has_solution(self) -> bool:
        """True when ``solution/solve.sh`` exists."""
        return (self.solution_dir / "solve.sh").is_file()

    @property
    def image_tag(self) -> str:
        """Local image tag, cached by content hash: ``mindforge-task/<id>:<hash[:16]>``."""
        safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in self.id.lower())
        return f"mindforge-task/{safe}:{self.content_hash[:16]}"

    @property
    def family(self) -> str:
        """The family the task's shared image belongs to: ``[metadata] family``, else the task id."""
        family = (self.config.metadata.model_extra or {}).get("family")
        return family if isinstance(family, str) and family else self.id

    @property
    def shared_image_tag(self) -> str | None:
        """``mindforge-family/<family>:<env_hash[:16]>`` for a task with instance steps, else None."""
        if not self.instance_steps:
            return None
        return f"mindforge-family/{_safe_repo(self.family)}:{self.env_hash[:16]}"

    @property
    def run_image(self) -> str:
        """The image sandboxes start from: the shared image with instance steps, else ``image_tag``."""
        return self.shared_image_tag or self.image_tag


def _safe_repo(name: str) -> str:
    """``name`` as a Docker repository path component (lower case, ``[a-z0-9._-]``)."""
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in name.lower())
    return safe.strip("._-") or "family"
