"""A pool of family instances: write them as tasks, validate them many at a time, say which file is at fault.

:func:`materialise_instances` writes drawn instances (:mod:`mindforge.discovery.sampling`)
as task directories with ``[metadata] family`` and ``family_params``; their Dockerfiles
carry the instance-steps marker, so all of a family's instances share one image
(:mod:`mindforge.tasks.dockerfile`). :func:`validate_instances` validates them as
Discovery validates a task (:func:`mindforge.trials.validate.validate_tasks`: builds, the
oracle passes twice, nop fails, each in a fresh sandbox, several tasks at once) and adds to
each failed verdict the family file to look at: ``templates/common/<generator>`` when the
instance's generator failed at start, ``templates/environment/Dockerfile`` when the family's
image did not build, and ``family.toml``'s ``example`` when the failed instance is the
family's example.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from mindforge.discovery.families import COMMON, FAMILY_TOML, TEMPLATES, Family
from mindforge.discovery.materialise import DiscoveredTaskLimits, materialise
from mindforge.discovery.sampling import Instance
from mindforge.errors import InputError
from mindforge.sandbox.docker import DockerEngine
from mindforge.tasks.image_map import ImageMap
from mindforge.tasks.model import Task
from mindforge.trials.record import FailureClass, TrialRecord
from mindforge.trials.validate import TaskValidation, Verdict, validate_tasks


def materialise_instances(
    family: Family, instances: Iterable[Instance], staging_dir: Path, *, limits: DiscoveredTaskLimits | None = None
) -> list[Path]:
    """Render each instance and write it as ``staging_dir/<instance id>``.

    Args:
        family: the family the instances were drawn from.
        instances: the instances (:class:`~mindforge.discovery.sampling.Instance`).
        staging_dir: where the task directories go (created when missing).
        limits: ``task.toml`` limits (default :class:`DiscoveredTaskLimits`).

    Returns:
        The task directories, in the instances' order.

    Raises:
        InputError: an instance does not render, or its directory exists.
    """
    out = []
    for inst in instances:
        proposal = family.render(inst.params)
        meta = {"family": family.name, "family_params": inst.params}
        out.append(materialise(proposal, staging_dir, limits=limits, metadata=meta))
    return out


def validate_instances(
    tasks: list[Task],
    engine: DockerEngine,
    *,
    artifact_root: Path,
    image_map: ImageMap | None = None,
    workers: int = 4,
    families: Mapping[str, Family] | None = None,
    oracle_runs: int = 2,
    run_id: str | None = None,
    on_trial: Callable[[TrialRecord], None] | None = None,
) -> list[TaskValidation]:
    """Validate family instances ``workers`` at a time; failed verdicts name the family file at fault.

    Args:
        tasks: the loaded instances (any task works; only instances of a family in
            ``families`` get the family's files named).
        engine: the Docker engine wrapper.
        artifact_root: where trial artifacts go.
        image_map: public-base rewrite map, or None.
        workers: tasks validated at once (>= 1).
        families: the families by name (default: none named).
        oracle_runs: oracle repetitions per task.
        run_id: run id of every trial (default a fresh ``validate-<hex>``).
        on_trial: called after each trial.

    Returns:
        One validation per task, in order; a failed one's first reason names the family
        file (:func:`family_reason`).

    Raises:
        ValueError: ``workers`` < 1.
    """
    results = validate_tasks(tasks, engine, artifact_root=artifact_root, image_map=image_map, workers=workers,
                             oracle_runs=oracle_runs, run_id=run_id, on_trial=on_trial)
    for task, result in zip(tasks, results, strict=True):
        family = (families or {}).get(task.family)
        if family is not None and result.verdict != Verdict.VALID:
            result.reasons.insert(0, family_reason(family, task, result))
    return results


def family_reason(family: Family, task: Task, result: TaskValidation) -> str:
    """Which of the family's files a failed verdict points at, as an :class:`InputError`'s text.

    Args:
        family: the instance's family.
        task: the instance.
        result: its failed validation.

    Returns:
        ``<family>/templates/common/<files>: ...`` when the instance steps failed (the
        generator), ``<family>/templates/environment/Dockerfile: ...`` when the family's
        image did not build, else ``<family>/family.toml: example: ...`` for the family's
        example and ``<family>/family.toml: params: ...`` for another instance.
    """
    params: Any = (task.config.metadata.model_extra or {}).get("family_params")
    what = f"instance {task.id} (params {params}): {result.verdict.value}"
    failed = next((r for r in result.trials if r.failure_class == FailureClass.ENV_BUILD_FAILED), None)
    if failed is not None and "build_log" not in failed.artifacts and "instance_log" in failed.artifacts:
        # the family's image was there; the instance's own steps (its generator) failed at start
        common = sorted(p.relative_to(family.root).as_posix() for p in (family.root / TEMPLATES / COMMON).rglob("*")
                        if p.is_file())
        return str(InputError(family.root / (common[0] if len(common) == 1 else f"{TEMPLATES}/{COMMON}"), "",
                              f"the generator failed: {what}: {failed.failure_detail}"))
    if failed is not None:
        return str(InputError(family.root / TEMPLATES / "environment" / "Dockerfile", "",
                              f"the family's image did not build: {what}: {failed.failure_detail}"))
    field = "example" if params == family.example else "params"
    because = "the family's example does not validate" if field == "example" else "the instance does not validate"
    return str(InputError(family.root / FAMILY_TOML, field, f"{because}: {what}: {'; '.join(result.reasons)}"))
