"""The curriculum of a lineage that draws from task families: sample, write and validate instances (sandbox queue).

``prepare_curriculum`` runs once, before ``prepare_lineage`` registers the pool:

1. each family of the curriculum is loaded and sampled
   (:func:`mindforge.discovery.sampling.sample_instances`: seeded, unique by canonical
   parameters, spread over its difficulty levels); a training family draws
   ``instances + selection_instances``, a held-out one ``instances``;
2. every instance is written as a task folder under
   ``<artifacts>/instances/<family>-<family hash>/<instance id>`` (one folder per family
   version: a changed family gets new folders, never overwrites an old one's);
3. every instance is validated as Discovery validates a task - the family's own
   ``[example]`` first (one Ray task per family: it also builds the family's one image),
   then the drawn instances in parallel Ray tasks (:func:`workers.ray_trials.validate_instance_task`).
   Verdicts are cached by content hash under ``<artifacts>/instances/validated/``, so a
   second lineage on the same instances validates nothing again. An instance that fails is
   set aside and replaced by a fresh draw (twice at most); a family whose example fails
   stops the lineage with an error naming its ``family.toml`` and the field ``example``;
4. the instances are dealt to the splits (:mod:`mindforge.evaluation.curriculum`).

The result is small (paths, hashes, splits); the pool is registered by ``prepare_lineage``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mindforge.errors import InputError
from mindforge.evaluation.curriculum import DrawnInstance, deal_instances, pick_selection
from mindforge.payloads import CurriculumInstance, PrepareCurriculumInput, PrepareCurriculumResult
from mindforge.payloads.ray_tasks import InstanceVerdict, SandboxSettings, ValidateInstanceTaskInput
from mindforge.settings import Settings, get_settings

#: fresh draws for a family whose instances failed validation (each draws what failed)
REDRAWS = 2
#: Ray CPUs of one instance validation (its sandboxes mostly wait on the Docker engine)
VALIDATE_CPUS = 0.5
#: tags every instance's task.toml carries
INSTANCE_TAGS = ("family-instance",)


class _Draw:
    """One drawn instance while it is prepared: where it lives and its validation."""

    def __init__(self, family: str, instance_id: str, level: str, path: Path) -> None:
        self.family, self.instance_id, self.level, self.path = family, instance_id, level, path
        self.verdict: InstanceVerdict | None = None


def instance_root(artifacts: Path) -> Path:
    """Where instances are written: ``<artifacts>/instances``."""
    return Path(artifacts) / "instances"


class CurriculumActivities:
    """The curriculum activity, bound to the worker's artifact root and sandbox settings.

    Args:
        settings: the worker's settings (default :func:`mindforge.settings.get_settings`).
    """

    def __init__(self, settings: Settings | None = None) -> None:
        settings = settings or get_settings()
        self.sandbox = SandboxSettings.from_settings(settings)
        self.root = instance_root(settings.artifacts)

    @activity.defn(name="prepare_curriculum")
    async def prepare_curriculum(self, inp: PrepareCurriculumInput) -> PrepareCurriculumResult:
        """Sample, write and validate the curriculum's instances, and deal them to the splits (idempotent).

        Raises:
            ApplicationError: non-retryable ``InputError`` for a family that does not load
                or is not in the folder, a family whose ``[example]`` does not validate, or a
                training family left without a valid instance.
        """
        started = time.monotonic()
        try:
            result = await self._prepare(inp)
        except InputError as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc
        result.seconds = time.monotonic() - started
        return result

    async def _prepare(self, inp: PrepareCurriculumInput) -> PrepareCurriculumResult:
        from mindforge.discovery.families import load_families

        spec = inp.curriculum
        loaded = await asyncio.to_thread(load_families, Path(spec.families_dir))
        missing = sorted(set(spec.families) - set(loaded))
        if missing:
            raise InputError(spec.families_dir, "families", f"no family named {', '.join(missing)} in the folder")
        families = {name: loaded[name] for name in sorted(spec.families)}
        out = PrepareCurriculumResult()
        await self._check_examples(inp, families)
        draws: dict[str, list[_Draw]] = {}
        for name, family in families.items():
            want = spec.instances + (0 if name in spec.sealed_families else spec.selection_instances)
            draws[name] = await asyncio.to_thread(self._draw, family, want, spec.seed, set(), out.warnings)
        for round_ in range(REDRAWS + 1):
            todo = [d for ds in draws.values() for d in ds if d.verdict is None]
            await self._validate(inp.lineage_id, spec.families_dir, todo, out)
            failed = {name: [d for d in ds if d.verdict is not None and not d.verdict.ok] for name, ds in draws.items()}
            if round_ == REDRAWS or not any(failed.values()):
                break
            for name, bad in failed.items():
                if bad:
                    seen = {d.instance_id for d in draws[name]}
                    extra = await asyncio.to_thread(self._draw, families[name], len(bad), spec.seed, seen, out.warnings)
                    draws[name] += extra
        return self._deal(inp, draws, out)

    def _draw(self, family: Any, n: int, seed: int, exclude: set[str], warnings: list[str]) -> list[_Draw]:
        """Sample ``n`` instances of ``family`` (none of ``exclude``) and write each as a task folder."""
        from mindforge.discovery.sampling import sample_instances

        sample = sample_instances(family, n, seed=seed, exclude=exclude)
        warnings.extend(sample.warnings)
        return [
            _Draw(family.name, inst.instance_id, inst.level, self._write(family, inst.params, inst.instance_id))
            for inst in sample.instances
        ]

    def _write(self, family: Any, params: dict[str, Any], instance_id: str) -> Path:
        """The instance's task folder, written once (a retry finds it; a changed family gets another folder)."""
        from mindforge.discovery.materialise import DiscoveredTaskLimits, materialise, move_task_dir
        from mindforge.tasks.hashing import content_hash

        folder = self.root / f"{family.name}-{content_hash(family.root)[:8]}"
        dest = folder / instance_id
        if dest.is_dir():
            return dest
        staging = folder / ".staging"
        staged = staging / instance_id
        if staged.exists():  # a crash between write and move
            import shutil

            shutil.rmtree(staged)
        materialise(
            family.render(params), staging, task_id=instance_id, limits=DiscoveredTaskLimits(tags=INSTANCE_TAGS),
            metadata={"family": family.name, "family_params": params},
        )
        return move_task_dir(staged, dest)

    async def _check_examples(self, inp: PrepareCurriculumInput, families: dict[str, Any]) -> None:
        """Validate each family's ``[example]`` (building its image); a family whose example fails is an error."""
        examples = [
            _Draw(name, f"{name}-example", "example", await asyncio.to_thread(
                self._write, family, family.example, family.instance_id(family.example)
            ))
            for name, family in families.items()
        ]
        await self._validate(inp.lineage_id, inp.curriculum.families_dir, examples, None)
        for draw in examples:
            if draw.verdict is not None and not draw.verdict.ok:
                why = "; ".join(draw.verdict.reasons) or draw.verdict.verdict
                raise InputError(
                    families[draw.family].root / "family.toml", "example",
                    f"family {draw.family!r}: its example does not validate ({draw.verdict.verdict}): {why}",
                )

    async def _validate(
        self, lineage_id: str, families_dir: str, draws: Iterable[_Draw], out: PrepareCurriculumResult | None
    ) -> None:
        """Give every draw its verdict: from the cache, else from a Ray task; counted in ``out``."""
        import ray

        from workers.ray_trials import validate_instance_task

        todo: dict[Any, _Draw] = {}
        for draw in draws:
            cached = await asyncio.to_thread(self._cached, draw.path)
            if cached is not None:
                draw.verdict = cached
                if out is not None:
                    out.cached += 1
                continue
            payload = ValidateInstanceTaskInput(
                task_path=str(draw.path), run_id=f"{lineage_id}/curriculum", sandbox=self.sandbox,
                families_dir=families_dir,
            )
            todo[validate_instance_task.options(num_cpus=VALIDATE_CPUS).remote(payload)] = draw
        pending = list(todo)
        try:
            while pending:
                activity.heartbeat({"pending": len(pending)})
                ready, pending = await asyncio.to_thread(ray.wait, pending, num_returns=1, timeout=2.0)
                for ref in ready:
                    verdict: InstanceVerdict = ray.get(ref)
                    todo[ref].verdict = verdict
                    await asyncio.to_thread(self._cache, verdict)
                    if out is not None:
                        out.validated += 1
        except asyncio.CancelledError:
            for ref in pending:
                ray.cancel(ref)
            raise

    def _cache_file(self, task_hash: str) -> Path:
        return self.root / "validated" / f"{task_hash}.json"

    def _cached(self, path: Path) -> InstanceVerdict | None:
        """The cached verdict of the instance at ``path`` (by its content hash), or None."""
        from mindforge.tasks.hashing import content_hash

        file = self._cache_file(content_hash(path))
        if not file.is_file():
            return None
        try:
            return InstanceVerdict.model_validate_json(file.read_text(encoding="utf-8"))
        except ValueError:  # a half-written cache file: validate again
            return None

    def _cache(self, verdict: InstanceVerdict) -> None:
        """Cache a verdict (valid or not; an infrastructure failure is not cached)."""
        if not verdict.task_hash or any("infra_error" in r for r in verdict.reasons):
            return
        file = self._cache_file(verdict.task_hash)
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(".tmp")
        tmp.write_text(verdict.model_dump_json(), encoding="utf-8")
        tmp.replace(file)

    def _deal(
        self, inp: PrepareCurriculumInput, draws: dict[str, list[_Draw]], out: PrepareCurriculumResult
    ) -> PrepareCurriculumResult:
        """The valid instances on their splits; the rejected ones named; a training family with none is an error."""
        spec = inp.curriculum
        valid: list[_Draw] = []
        for name, ds in draws.items():
            good = [d for d in ds if d.verdict is not None and d.verdict.ok]
            out.rejected += [
                f"{d.instance_id}: {d.verdict.verdict}: {'; '.join(d.verdict.reasons)}"
                for d in ds if d.verdict is not None and not d.verdict.ok
            ]
            if not good and name not in spec.sealed_families:
                raise InputError(spec.families_dir, f"families.{name}", "no instance of the family validated")
            valid += good
        drawn = [DrawnInstance(instance_id=d.instance_id, family=d.family, level=d.level) for d in valid]
        training = [d for d in drawn if d.family not in spec.sealed_families]
        roles = {d.instance_id: d for d in pick_selection(training, spec.selection_instances, key=inp.lineage_id)}
        drawn = [roles.get(d.instance_id, d) for d in drawn]
        splits = deal_instances(
            drawn, sealed_fraction=spec.sealed_fraction, key=inp.lineage_id, sealed_families=spec.sealed_families
        )
        out.instances = [
            CurriculumInstance(
                path=str(d.path), task_hash=d.verdict.task_hash if d.verdict else "", instance_id=d.instance_id,
                family=d.family, level=d.level, split=splits[d.instance_id],
            )
            for d in valid
        ]
        return out

    def all(self) -> list[Any]:
        """Every activity of this class (on the sandbox queue)."""
        return [self.prepare_curriculum]
