"""Load task directories in the Terminal-Bench 2 / Harbor layout (docs/tasks.md).

A task directory holds ``task.toml``, ``instruction.md``, ``environment/Dockerfile``
(unless ``[environment].docker_image`` names a prebuilt image), ``tests/test.sh`` and
optionally ``solution/solve.sh``. Every defect is an :class:`~mindforge.errors.InputError`
naming the file, the TOML key path and the reason.

Policy on keys (as Harbor's format keeps growing): unknown keys are kept (the models allow
extras) and reported in ``Task.warnings`` and through :mod:`logging`; ``[metadata]`` is a
free-form table in Harbor, so its extra keys are kept without a warning. A known key with
a wrong type or value is an error. A feature not supported yet (``allowlist`` networking,
multi-step tasks, GPUs, a separate verifier environment) is an error whose reason starts
with ``unsupported``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from mindforge.errors import InputError
from mindforge.tasks.dockerfile import InstanceSplit, shared_env_hash, split_instance_steps
from mindforge.tasks.hashing import content_hash, iter_task_files
from mindforge.tasks.model import EnvironmentMode, NetworkMode, Task, TaskConfig
from mindforge.tomlfile import read_toml

logger = logging.getLogger(__name__)

TASK_TOML = "task.toml"
INSTRUCTION_MD = "instruction.md"
DOCKERFILE = "environment/Dockerfile"
TEST_SH = "tests/test.sh"
SOLVE_SH = "solution/solve.sh"
#: the largest instruction.md loaded (bytes): an instruction is read by a model whole
MAX_INSTRUCTION_BYTES = 1 << 20

# Sections whose extra keys are part of the format, not typos.
_FREE_FORM_SECTIONS = frozenset({"metadata"})


# --------------------------------------------------------------------------- helpers


def dotted(loc: Sequence[int | str]) -> str:
    """A pydantic error location as a key path: ``('a', 'b', 0, 'c')`` -> ``a.b[0].c``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def input_error_from_validation(path: Path, exc: ValidationError, prefix: str = "") -> InputError:
    """The first error of a pydantic ``ValidationError`` as an :class:`InputError`.

    Args:
        path: the file that was validated.
        exc: the validation error.
        prefix: key path of the validated table inside the file (``""`` for the root).

    Returns:
        An InputError naming ``path``, the dotted key path and pydantic's message with the
        offending value; further errors are counted in the reason.
    """
    errors = exc.errors(include_url=False)
    first = errors[0]
    field = dotted(first["loc"])
    if prefix:
        field = f"{prefix}.{field}" if field else prefix
    reason = first["msg"]
    if first["type"] in ("model_type", "dict_type"):
        reason = "expected a table"
    if first["type"] != "missing" and "input" in first:
        reason += f" (got {_short(first['input'])})"
    if len(errors) > 1:
        reason += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    return InputError(path, field, reason)


def _short(value: Any) -> str:
    """``repr(value)``, cut to 80 characters: a hostile file's megabyte value is not echoed."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def _unknown_keys(model: BaseModel, prefix: str = "") -> list[str]:
    """Dotted paths of extra keys kept in ``model`` and its sub-models."""
    found: list[str] = []
    for key in sorted(model.model_extra or {}):
        found.append(f"{prefix}{key}")
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel) and name not in _FREE_FORM_SECTIONS:
            found.extend(_unknown_keys(value, f"{prefix}{name}."))
    return found


# --------------------------------------------------------------------------- task.toml


def _pre_validate(toml_path: Path, data: dict[str, Any], warnings: list[str]) -> None:
    """Migrations and unsupported top-level features, before pydantic sees ``data``."""
    env = data.get("environment")
    if isinstance(env, dict) and "allow_internet" in env:
        allow = env.pop("allow_internet")
        if not isinstance(allow, bool):
            raise InputError(
                toml_path, "environment.allow_internet", f"expected true or false (got {_short(allow)})"
            )
        mapped = NetworkMode.PUBLIC if allow else NetworkMode.NO_NETWORK
        if "network_mode" not in env:
            env["network_mode"] = mapped.value
        elif env["network_mode"] != mapped.value:
            warnings.append(
                f"{TASK_TOML}: 'environment.allow_internet' ignored: "
                f"'environment.network_mode' = {_short(env['network_mode'])} wins"
            )
    steps = data.pop("steps", None)
    if steps is not None:
        if not isinstance(steps, list):
            raise InputError(toml_path, "steps", f"expected an array of tables (got {_short(steps)})")
        if steps:
            raise InputError(
                toml_path, "steps", f"unsupported: multi-step tasks ({len(steps)} steps given)"
            )
    artifacts = data.pop("artifacts", None)
    if artifacts is not None:
        if not isinstance(artifacts, list):
            raise InputError(toml_path, "artifacts", f"expected an array (got {_short(artifacts)})")
        if artifacts:
            warnings.append(
                f"{TASK_TOML}: 'artifacts' ignored: artifact collection not supported yet"
            )


def _check_supported(toml_path: Path, config: TaskConfig) -> None:
    """Raise for known keys whose value asks for a feature MindForge does not run yet."""
    env = config.environment
    if env.network_mode == NetworkMode.ALLOWLIST:
        raise InputError(
            toml_path, "environment.network_mode", "unsupported: 'allowlist' networking"
        )
    if env.allowed_hosts:
        raise InputError(
            toml_path,
            "environment.allowed_hosts",
            "unsupported: host allowlists ('allowlist' networking)",
        )
    if env.gpus > 0:
        raise InputError(toml_path, "environment.gpus", f"unsupported: GPUs ({env.gpus} requested)")
    if config.verifier.environment_mode == EnvironmentMode.SEPARATE:
        raise InputError(
            toml_path,
            "verifier.environment_mode",
            "unsupported: 'separate' verifier environment (only 'shared' runs)",
        )


def load_task_config(toml_path: Path) -> tuple[TaskConfig, list[str]]:
    """Read and check one ``task.toml``.

    Args:
        toml_path: the file.

    Returns:
        The config and the warnings (unknown keys kept, ignored keys), each naming the
        file and the key.

    Raises:
        InputError: missing or malformed file, a wrong type or value, or an unsupported
            feature.
    """
    data = read_toml(toml_path)
    warnings: list[str] = []
    _pre_validate(toml_path, data, warnings)
    try:
        config = TaskConfig.model_validate(data)
    except ValidationError as exc:
        raise input_error_from_validation(toml_path, exc) from exc
    _check_supported(toml_path, config)
    warnings.extend(f"{TASK_TOML}: unknown key '{key}' kept" for key in _unknown_keys(config))
    return config, warnings


# --------------------------------------------------------------------------- task dirs


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise InputError(path, "", "missing file")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, "", f"not UTF-8 text (byte {exc.start})") from exc
    except OSError as exc:
        raise InputError(path, "", f"cannot read file: {exc.strerror or exc}") from exc


def load_task(path: Path) -> Task:
    """Load and check one task directory.

    Args:
        path: the task directory; its name is the task id.

    Returns:
        The task, with its content hash and warnings (also logged at WARNING).

    Raises:
        InputError: a missing or bad file, a wrong or unsupported value, a symbolic link
            pointing outside the folder, a file name that is not UTF-8, or an
            instruction over :data:`MAX_INSTRUCTION_BYTES`; the error names the file,
            the key path and the reason.
    """
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise InputError(root, "", "not a task directory (no such directory)")
    _check_links(root)
    config, warnings = load_task_config(root / TASK_TOML)

    size = (root / INSTRUCTION_MD).stat().st_size if (root / INSTRUCTION_MD).is_file() else 0
    if size > MAX_INSTRUCTION_BYTES:
        raise InputError(
            root / INSTRUCTION_MD, "", f"{size} bytes; an instruction holds at most {MAX_INSTRUCTION_BYTES} bytes"
        )
    instruction = _read_text(root / INSTRUCTION_MD)
    if not instruction.strip():
        raise InputError(root / INSTRUCTION_MD, "", "empty instruction")
    if config.environment.docker_image is None and not (root / DOCKERFILE).is_file():
        raise InputError(
            root / DOCKERFILE, "", "missing file (needed unless [environment].docker_image is set)"
        )
    if not (root / TEST_SH).is_file():
        raise InputError(root / TEST_SH, "", "missing file (the verifier entry point)")
    if (root / "solution").is_dir() and not (root / SOLVE_SH).is_file():
        warnings.append(
            f"{SOLVE_SH}: missing; solution/ ignored, the task has no reference solution"
        )

    for message in warnings:
        logger.warning("%s: %s", root, message)
    split = None if config.environment.docker_image else _instance_split(root)
    return Task(
        id=root.name,
        path=root,
        config=config,
        instruction=instruction,
        content_hash=content_hash(root),
        warnings=warnings,
        instance_steps=split.steps if split else (),
        shared_dockerfile=split.head if split else "",
        env_hash=shared_env_hash(split.head, root / "environment") if split else "",
    )


def _check_links(root: Path) -> None:
    """Refuse symbolic links in the task folder that point outside it (or loop).

    A link such as ``instruction.md -> ~/.ssh/id_rsa`` would hand a host file to the
    model, the image build or the verifier; links inside the folder are fine.

    Raises:
        InputError: naming the link and its target.
    """
    for _rel, entry in iter_task_files(root):
        if not entry.is_symlink():
            continue
        target = os.readlink(entry)
        try:
            resolved = (entry.parent / target).resolve(strict=False)
        except (RuntimeError, OSError):  # a loop of links (3.11 raises RuntimeError)
            raise InputError(entry, "", f"a symbolic link loop (-> {target!r})") from None
        if not resolved.is_relative_to(root):
            raise InputError(
                entry, "", f"a symbolic link pointing outside the task folder (-> {target!r}); copy the file in"
            )


def _instance_split(root: Path) -> InstanceSplit | None:
    """The Dockerfile split at its instance-steps marker, or None without one.

    Raises:
        InputError: the Dockerfile is not UTF-8, or what follows the marker cannot run
            as instance steps (:func:`mindforge.tasks.dockerfile.split_instance_steps`).
    """
    path = root / DOCKERFILE
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(path, "", f"cannot read file: {exc.strerror or exc}") from exc
    if b"mindforge:" not in raw:  # the marker's word; other Dockerfiles need not be UTF-8
        return None
    return split_instance_steps(_read_text(path), path, root / "environment")


def find_task_dirs(path: Path) -> list[Path]:
    """The task directories at ``path``.

    Args:
        path: a task directory (holds ``task.toml``) or a folder of task directories.

    Returns:
        ``[path]`` for a task directory; otherwise the sub-directories holding a
        ``task.toml``, sorted by name (hidden ones skipped).

    Raises:
        InputError: ``path`` is not a directory or holds no task directory.
    """
    root = Path(path).expanduser()
    if not root.is_dir():
        raise InputError(root, "", "no such directory")
    if (root / TASK_TOML).is_file():
        return [root]
    found = sorted(
        (child for child in root.iterdir()
         if child.is_dir() and not child.name.startswith(".") and (child / TASK_TOML).is_file()),
        key=lambda p: p.name,
    )
    if not found:
        raise InputError(root, "", f"no task directories (folders with {TASK_TOML}) found")
    return found


def load_tasks(paths: Iterable[Path]) -> list[Task]:
    """Load every task under ``paths`` (each a task directory or a folder of them).

    Args:
        paths: task directories or folders of task directories.

    Returns:
        The tasks in the order given, each folder's tasks sorted by name.

    Raises:
        InputError: as :func:`load_task` and :func:`find_task_dirs`, or two tasks share an
            id (directory name).
    """
    tasks: list[Task] = []
    seen: dict[str, Path] = {}
    for path in paths:
        for task_dir in find_task_dirs(Path(path)):
            task = load_task(task_dir)
            if task.id in seen:
                if seen[task.id] == task.path:
                    continue
                raise InputError(
                    task.path, "", f"duplicate task id {task.id!r} (also at {seen[task.id]})"
                )
            seen[task.id] = task.path
            tasks.append(task)
    return tasks
