"""Family curricula: which families a lineage holds out, where each drawn instance goes, and the sealed readings.

A lineage whose pool comes from task families (``--families DIR --instances N``) splits it
once, at lineage start, and never again (docs/design.md, "Three splits"):

- **held-out families** (:func:`choose_sealed_families`): whole families the lineage never
  sees in search, selection, training, the experience library or Discovery; every one of
  their instances is sealed. Chosen by a seeded rule (the families in
  :func:`~mindforge.evaluation.splits.order_key` order under the lineage's key) and
  recorded in the spec;
- every **training family**'s drawn instances are dealt to search and to the sealed split
  (:func:`deal_instances`, level by level, so both get a mix of difficulties), and
  selection draws its own instances of the training families (sized by the gates' power);
- hand-written tasks pinned to the sealed split (``--sealed-tasks``) stay whole tasks.

The sealed side is then read apart by provenance, never pooled (:class:`SealedReading`,
:func:`classify_sealed`; each task's provenance is a :class:`SealedOrigin`): *sealed
instances* (unseen instances of the training families: in distribution), *sealed
families* (out-of-family transfer), *sealed tasks* (hand-written tasks pinned to the sealed
split that nothing in the lineage restates: transfer to a human-written set), *restated
tasks* (pinned tasks whose reference solution shares a command shape with what the lineage
mined: :mod:`mindforge.evaluation.labels`) and *dealt tasks* (hand-written tasks dealt to
the sealed split by fraction, their siblings on search: in distribution of the hand-written
pool). Sealed instances are further split into *copyable* (the exact answer - the
reference solution's commands - is on the search split or in the library) and *needs
adaptation* (:func:`copyable_instances`). The figures of each reading come with their own
interval and counts (Endless Terminals reports its own dev set beside Terminal-Bench 2 in
the same way: in-distribution gains are easy, transfer is hard).

Pure: stdlib and pydantic.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

from pydantic import BaseModel, Field

from mindforge.evaluation.splits import PoolSplit, order_key


class SealedReading(StrEnum):
    """One way the sealed split is read (each with its own figures, never pooled)."""

    INSTANCES = "instances"
    FAMILIES = "families"
    TASKS = "tasks"
    RESTATED = "restated"
    DEALT = "dealt"


class SealedOrigin(StrEnum):
    """How a task got onto the sealed split (its provenance, recorded at lineage start).

    ``pinned``: a hand-written task pinned sealed (``--sealed-tasks``, or a split override);
    ``dealt``: a hand-written task of ``--tasks`` dealt to sealed by fraction (its siblings
    sit on search); ``family_instance``: an instance of a training family dealt to sealed;
    ``held_out_family``: an instance of a family the lineage holds out whole.
    """

    PINNED = "pinned"
    DEALT = "dealt"
    FAMILY_INSTANCE = "family_instance"
    HELD_OUT_FAMILY = "held_out_family"


#: the readings in the order every report shows them
READING_ORDER: tuple[SealedReading, ...] = tuple(SealedReading)
#: the readings every headline names, figure or not (the others only when the lineage has them)
HEADLINE_READINGS: tuple[SealedReading, ...] = (SealedReading.INSTANCES, SealedReading.FAMILIES, SealedReading.TASKS)
#: what each reading measures, in words (report headings)
READING_TITLES: dict[SealedReading, str] = {
    SealedReading.INSTANCES: "sealed instances (unseen instances of the training families: in distribution)",
    SealedReading.FAMILIES: "sealed families (families the lineage never sees: out-of-family transfer)",
    SealedReading.TASKS: (
        "sealed tasks (pinned hand-written tasks nothing in the lineage restates: transfer to a human-written set)"
    ),
    SealedReading.RESTATED: (
        "restated tasks (pinned hand-written tasks that share a solution shape with the library: not transfer)"
    ),
    SealedReading.DEALT: (
        "dealt tasks (hand-written tasks dealt to sealed by fraction, their siblings on search: in distribution)"
    ),
}
#: each reading's short name
READING_NAMES: dict[SealedReading, str] = {
    SealedReading.INSTANCES: "sealed instances",
    SealedReading.FAMILIES: "sealed families",
    SealedReading.TASKS: "sealed tasks",
    SealedReading.RESTATED: "restated tasks",
    SealedReading.DEALT: "dealt tasks",
}
#: the two parts of the sealed-instances reading
COPYABLE = "copyable"
NEEDS_ADAPTATION = "needs_adaptation"


class DrawnInstance(BaseModel):
    """One sampled, validated family instance, before it is placed on a split.

    Attributes:
        instance_id: ``<family>-<8 hex>`` (the canonical-parameter hash).
        family: the family's name.
        level: its difficulty level (``easy``, ``medium``, ``hard``).
        role: ``pool`` (search or sealed, dealt by :func:`deal_instances`) or
            ``selection`` (drawn for the selection split).
    """

    instance_id: str
    family: str
    level: str = "easy"
    role: str = "pool"


class ReadingsRecord(BaseModel):
    """A lineage's sealed readings: recorded at start, relabelled as the lineage mines (the tasks stay frozen).

    A record written before provenance was recorded has no ``origins``; it still loads, and
    its *sealed tasks* are its hand-written sealed tasks whatever their provenance.

    Attributes:
        training_families: families searched and trained on.
        sealed_families: held-out families (their instances are all sealed).
        readings: reading -> sealed task content hashes, sorted.
        copyable: sealed-instance hashes whose exact answer is on the search split or in the library.
        family_of: task content hash -> family name (family instances only).
        origins: sealed task hash -> how it got there (:class:`SealedOrigin`).
        task_ids: sealed task hash -> its task id (to name a task that moved).
        restated: pinned task hash -> what restates it (library entries, search tasks' solutions).
        moved_at: task hash -> the check that moved it (``lineage start``, ``generation 1: Discovery
            admission``, ...) to the restated reading or to copyable.
        checks: the checks run, oldest first.
    """

    training_families: list[str] = Field(default_factory=list)
    sealed_families: list[str] = Field(default_factory=list)
    readings: dict[SealedReading, list[str]] = Field(default_factory=dict)
    copyable: list[str] = Field(default_factory=list)
    family_of: dict[str, str] = Field(default_factory=dict)
    origins: dict[str, SealedOrigin] = Field(default_factory=dict)
    task_ids: dict[str, str] = Field(default_factory=dict)
    restated: dict[str, list[str]] = Field(default_factory=dict)
    moved_at: dict[str, str] = Field(default_factory=dict)
    checks: list[str] = Field(default_factory=list)

    def units_of(self, reading: SealedReading) -> tuple[dict[str, str], str]:
        """Each task's independent unit on ``reading`` and its name: families for the family readings, else tasks."""
        if reading in (SealedReading.INSTANCES, SealedReading.FAMILIES):
            return {h: f for h, f in self.family_of.items() if h in self.tasks_of(reading)}, "family"
        return {}, "task"

    def pinned(self) -> set[str]:
        """The pinned hand-written sealed tasks (without recorded origins: the hand-written ones)."""
        if self.origins:
            return {h for h, origin in self.origins.items() if origin == SealedOrigin.PINNED}
        return self.tasks_of(SealedReading.TASKS) | self.tasks_of(SealedReading.RESTATED)

    def tasks_of(self, reading: SealedReading) -> set[str]:
        """The sealed task hashes of one reading (empty when the lineage has none)."""
        return set(self.readings.get(reading, []))

    def parts_of_instances(self) -> dict[str, set[str]]:
        """The sealed-instances reading split into ``copyable`` and ``needs_adaptation``."""
        instances = self.tasks_of(SealedReading.INSTANCES)
        copyable = instances & set(self.copyable)
        return {COPYABLE: copyable, NEEDS_ADAPTATION: instances - copyable}


def choose_sealed_families(families: Sequence[str], count: int, *, key: str) -> list[str]:
    """The families a lineage holds out: the first ``count`` in :func:`order_key` order under ``key``.

    Args:
        families: the curriculum's family names.
        count: how many to hold out (0: none).
        key: the lineage's split key (its name), so the choice is seeded and reproducible.

    Returns:
        the held-out names, sorted.

    Raises:
        ValueError: ``count`` is negative or leaves no family to train on.
    """
    names = sorted(set(families))
    if count < 0 or (names and count >= len(names)):
        raise ValueError(f"cannot hold out {count} of {len(names)} families: at least one must stay to train on")
    ranked = sorted(names, key=lambda name: order_key(key, f"family:{name}"))
    return sorted(ranked[:count])


def deal_instances(
    drawn: Iterable[DrawnInstance], *, sealed_fraction: float, key: str, sealed_families: Iterable[str] = ()
) -> dict[str, PoolSplit]:
    """Place each drawn instance on a split: held-out families sealed, the others search / sealed / selection.

    A training family's ``pool`` instances are dealt level by level in :func:`order_key`
    order: of each level's instances, ``round(n * sealed_fraction)`` go to the sealed split
    (the leftover of rounding carried to the next level, so the family as a whole lands on
    its share), the rest to search; its ``selection`` instances go to the selection split.

    Args:
        drawn: the instances (ids unique).
        sealed_fraction: share of a training family's pool instances that are sealed, in [0, 1).
        key: the lineage's split key.
        sealed_families: held-out families.

    Returns:
        instance id -> split.
    """
    held_out = set(sealed_families)
    out: dict[str, PoolSplit] = {}
    pools: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for inst in drawn:
        if inst.family in held_out:
            out[inst.instance_id] = PoolSplit.SEALED
        elif inst.role == "selection":
            out[inst.instance_id] = PoolSplit.SELECTION
        else:
            pools[inst.family][inst.level].append(inst.instance_id)
    for levels in pools.values():
        carry = 0.0
        for level in sorted(levels):
            ids = sorted(levels[level], key=lambda i: order_key(key, i))
            want = len(ids) * sealed_fraction + carry
            take = min(len(ids), int(want + 0.5))
            carry = want - take
            for n, instance_id in enumerate(ids):
                out[instance_id] = PoolSplit.SEALED if n < take else PoolSplit.SEARCH
    return out


def copyable_instances(answers: Mapping[str, str], reachable: Iterable[str]) -> list[str]:
    """Sealed instances whose exact answer the lineage holds: copyable rather than needing adaptation.

    The answer is compared as commands (:func:`mindforge.evaluation.labels.answer_key`:
    each command of a reference solution or library entry with comments, ``set`` lines and
    runs of white space dropped), not as bytes: a Discovery admission with the same
    ``solve.sh`` under other wording, or a library entry whose commands are the instance's,
    make it copyable. Command *shapes* (programs and options only) are not enough: every
    instance of a family shares its family's shape, and copying a shape still needs the
    paths and literals adapted.

    Args:
        answers: sealed instance hash -> its answer key.
        reachable: the answer keys of the search split's reference solutions and the library's entries.

    Returns:
        the copyable sealed task hashes, sorted.
    """
    keys = set(reachable) - {""}
    return sorted(h for h, key in answers.items() if key and key in keys)


def sealed_origins(
    sealed: Iterable[str], family_of: Mapping[str, str], sealed_families: Iterable[str], pinned: Iterable[str]
) -> dict[str, SealedOrigin]:
    """How each sealed task got there.

    Args:
        sealed: the sealed split's task hashes.
        family_of: task hash -> family name, for family instances.
        sealed_families: held-out families.
        pinned: hand-written tasks pinned sealed; any other hand-written sealed task was dealt by fraction.

    Returns:
        task hash -> :class:`SealedOrigin`.
    """
    held_out, pinned = set(sealed_families), set(pinned)
    out = {}
    for task_hash in sorted(set(sealed)):
        family = family_of.get(task_hash)
        if family is not None:
            out[task_hash] = SealedOrigin.HELD_OUT_FAMILY if family in held_out else SealedOrigin.FAMILY_INSTANCE
        else:
            out[task_hash] = SealedOrigin.PINNED if task_hash in pinned else SealedOrigin.DEALT
    return out


def classify_sealed(
    sealed: Iterable[str],
    family_of: Mapping[str, str],
    sealed_families: Iterable[str],
    origins: Mapping[str, SealedOrigin] | None = None,
    restated: Iterable[str] = (),
) -> dict[SealedReading, list[str]]:
    """The reading each sealed task belongs to.

    Args:
        sealed: the sealed split's task hashes.
        family_of: task hash -> family name, for family instances.
        sealed_families: held-out families.
        origins: task hash -> provenance (None: every hand-written task counts as pinned).
        restated: pinned tasks that share a solution shape with what the lineage mined.

    Returns:
        reading -> sorted task hashes (every reading present, possibly empty): an instance
        of a held-out family is read as *sealed families*, of a training family as
        *sealed instances*; a hand-written task dealt by fraction as *dealt tasks*; a
        pinned one as *restated tasks* when something restates it, else *sealed tasks*.
    """
    held_out, restated, origins = set(sealed_families), set(restated), origins or {}
    out: dict[SealedReading, list[str]] = {r: [] for r in READING_ORDER}
    for task_hash in sorted(set(sealed)):
        family = family_of.get(task_hash)
        if family is not None:
            out[SealedReading.FAMILIES if family in held_out else SealedReading.INSTANCES].append(task_hash)
        elif origins.get(task_hash) == SealedOrigin.DEALT:
            out[SealedReading.DEALT].append(task_hash)
        elif task_hash in restated:
            out[SealedReading.RESTATED].append(task_hash)
        else:
            out[SealedReading.TASKS].append(task_hash)
    return out


def pick_selection(drawn: Iterable[DrawnInstance], per_family: int, *, key: str) -> list[DrawnInstance]:
    """Mark ``per_family`` instances of each family ``selection``, spread over its levels.

    Within a family the levels take turns (sorted by name), each giving its next instance
    in :func:`order_key` order, until ``per_family`` are marked or none is left.

    Args:
        drawn: the instances of the training families (their ``role`` is ignored).
        per_family: selection instances per family.
        key: the lineage's split key.

    Returns:
        the instances, each with its ``role`` (``selection`` or ``pool``), in the given order.
    """
    drawn = list(drawn)
    by_family: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for inst in drawn:
        by_family[inst.family][inst.level].append(inst.instance_id)
    chosen: set[str] = set()
    for levels in by_family.values():
        queues = [sorted(ids, key=lambda i: order_key(key, i)) for _, ids in sorted(levels.items())]
        picked = 0
        while picked < per_family and any(queues):
            for queue in queues:
                if queue and picked < per_family:
                    chosen.add(queue.pop(0))
                    picked += 1
    return [inst.model_copy(update={"role": "selection" if inst.instance_id in chosen else "pool"}) for inst in drawn]


def nominal_counts(
    training_families: int, held_out_families: int, *, instances: int, selection_instances: int, sealed_fraction: float
) -> dict[PoolSplit, int]:
    """The split sizes a curriculum asks for (before validation sets any instance aside).

    Args:
        training_families / held_out_families: how many of each.
        instances: instances per family (search and sealed, or all sealed when held out).
        selection_instances: selection instances per training family.
        sealed_fraction: share of a training family's instances that are sealed.

    Returns:
        split -> instances.
    """
    sealed_each = min(instances, int(instances * sealed_fraction + 0.5))
    return {
        PoolSplit.SEARCH: training_families * (instances - sealed_each),
        PoolSplit.SELECTION: training_families * selection_instances,
        PoolSplit.SEALED: training_families * sealed_each + held_out_families * instances,
    }
