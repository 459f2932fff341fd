"""Family curricula on the command line: ``--families DIR --instances N`` into a :class:`CurriculumSpec`.

``mindforge lineage start`` and ``mindforge quickstart`` take the same options; this module
turns them into the spec's curriculum (the held-out families chosen by the seeded rule,
:func:`mindforge.evaluation.curriculum.choose_sealed_families`), sizes the selection split
by the gates' power (:func:`mindforge.evaluation.sizing.size_selection`) unless
``--selection-instances`` fixes it, and counts the splits the curriculum asks for.
"""

from __future__ import annotations

from pathlib import Path

from mindforge.errors import InputError

FAMILIES_HELP = (
    "A folder of task families (each a family.toml plus templates/, as tasks/families): the pool draws "
    "--instances of each, sampled from its parameter schema and validated before the lineage starts."
)
INSTANCES_HELP = "Instances of each family for search and the sealed-instances reading (or all sealed, held out)."
SEALED_FAMILIES_HELP = (
    "Families held out whole (chosen by a seeded rule and recorded): their instances are only ever read as the "
    "sealed-families reading, never searched, trained on, put in the library or proposed by Discovery."
)
SELECTION_INSTANCES_HELP = (
    "Selection instances of each training family (default: sized so that the gates detect a lift of --target-lift "
    "with 80% power over --power-baseline)."
)
TARGET_LIFT_HELP = (
    "The lift (in pass rate) the gates must detect with 80% power; the selection split is sized for it (smaller "
    "lifts need more selection instances and more trials per gate)."
)
POWER_BASELINE_HELP = (
    "The parent pass rate the selection split is sized against (0: a parent that passes nothing, as a root under "
    "a plain harness; the power over other rates is printed too)."
)
SEALED_TASKS_HELP = "Hand-written task folders pinned to the sealed split (the sealed-tasks reading)."


def curriculum_spec(
    name: str,
    families_dir: Path,
    *,
    instances: int,
    sealed_families: int,
    sealed_fraction: float,
    selection_instances: int | None,
    seed: int,
):
    """The curriculum a lineage named ``name`` draws (selection instances still to size when None).

    Args:
        name: the lineage's name (the key of the held-out choice and of the dealing).
        families_dir: the folder of families.
        instances: instances per family.
        sealed_families: families to hold out.
        sealed_fraction: share of a training family's instances on the sealed split.
        selection_instances: selection instances per training family; None: 0 here, sized
            later by :func:`size_curriculum_selection`.
        seed: the sampling seed.

    Returns:
        a :class:`mindforge.payloads.CurriculumSpec`.

    Raises:
        InputError: the folder holds no family, a family does not load (naming its file and
            field), or ``--sealed-families`` leaves no family to train on.
    """
    from mindforge.discovery.families import load_families
    from mindforge.evaluation.curriculum import choose_sealed_families
    from mindforge.payloads import CurriculumSpec

    folder = Path(families_dir).expanduser().resolve()
    families = sorted(load_families(folder))
    try:
        held_out = choose_sealed_families(families, sealed_families, key=name)
    except ValueError as exc:
        raise InputError(folder, "--sealed-families", str(exc)) from None
    return CurriculumSpec(
        families_dir=str(folder), families=families, instances=instances,
        selection_instances=selection_instances or 0, sealed_fraction=sealed_fraction, sealed_families=held_out,
        seed=seed,
    )


def curriculum_counts(curriculum) -> dict[str, int]:
    """Split name -> instances the curriculum asks for (before validation)."""
    from mindforge.evaluation.curriculum import nominal_counts

    counts = nominal_counts(
        len(curriculum.training_families), len(curriculum.sealed_families), instances=curriculum.instances,
        selection_instances=curriculum.selection_instances, sealed_fraction=curriculum.sealed_fraction,
    )
    return {split.value: n for split, n in counts.items()}


def size_curriculum_selection(spec, fixed_tasks: int, gates_at, *, baseline: float, lift: float | None = None) -> str:
    """Set ``spec.curriculum.selection_instances`` by the gates' power; returns the line that says so.

    Args:
        spec: the lineage spec (its curriculum is changed in place).
        fixed_tasks: hand-written tasks on the selection split.
        gates_at: the gates as configured, given the number of selection tasks.
        baseline: the parent pass rate to size against.
        lift: the lift to detect (default :data:`mindforge.evaluation.sizing.TARGET_LIFT`, 0.10).

    Raises:
        InputError: no size reaches the power (naming ``--selection-instances``).
    """
    from mindforge.evaluation.power import GateCannotPassError
    from mindforge.evaluation.sizing import TARGET_LIFT, size_selection

    cur = spec.curriculum
    try:
        size = size_selection(
            gates_at, families=len(cur.training_families), fixed_tasks=fixed_tasks, baseline=baseline,
            lift=TARGET_LIFT if lift is None else lift, seed=spec.evaluation.seed,
        )
    except GateCannotPassError as exc:
        raise InputError(exc.field, "evaluation.splits", exc.reason) from None
    cur.selection_instances = size.per_family
    return size.describe()


def size_sealed_instances(spec, *, lift: float) -> str:
    """Set ``spec.evaluation.sealed_instance_attempts`` by the sealed-instances reading's power; returns the line.

    The reading's units are the training families, each with the sealed share of its
    instances; the attempts are the fewest (1 to 4) whose simulated 95% lower bound clears 0
    with 80% power at ``lift`` over a root passing nothing
    (:func:`mindforge.evaluation.reading_power.sealed_attempts_for_power`).

    Args:
        spec: the lineage spec, with a curriculum (changed in place).
        lift: the lift the reading should show above 0 (reward units).
    """
    from mindforge.evaluation.reading_power import sealed_attempts_for_power

    cur = spec.curriculum
    per = min(cur.instances, int(cur.instances * cur.sealed_fraction + 0.5))
    units = len(cur.training_families)
    if not per or units < 2:
        return f"sealed instances: {units} family(ies) x {per} instance(s): too few to size by power; attempts as set"
    got = sealed_attempts_for_power(units, per, lift=lift, seed=spec.evaluation.seed)
    spec.evaluation.sealed_instance_attempts = got.attempts
    verdict = "" if got.reached else f" (the most it takes; 80% is not reached at {got.attempts})"
    others = spec.evaluation.sealed_attempts or 1
    return (
        f"sealed instances sized by power: {got.attempts} attempt(s) on each of {units * per} tasks "
        f"({units} families), so that a lift of {lift:.2f} over a root passing nothing shows a 95% lower bound "
        f"above 0 in {got.power:.0%} of runs{verdict}; the other sealed readings: {others} attempt(s)"
    )
