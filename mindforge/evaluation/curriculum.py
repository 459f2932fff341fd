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

The sealed side is then read three ways, never pooled (:class:`SealedReading`,
:func:`classify_sealed`): *sealed instances* (unseen instances of the training families:
in distribution), *sealed families* (out-of-family transfer) and *sealed tasks*
(hand-written tasks: transfer to a human-written set). Sealed instances are further
split into *copyable* (the reference solution equals a search instance's, byte for byte)
and *needs adaptation* (:func:`copyable_instances`). The figures of each reading come with
their own interval and counts (Endless Terminals reports its own dev set beside
Terminal-Bench 2 in the same way: in-distribution gains are easy, transfer is hard).

Pure: stdlib and pydantic.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

from pydantic import BaseModel, Field

from mindforge.evaluation.splits import PoolSplit, order_key


class SealedReading(StrEnum):
    """One of the three ways the sealed split is read (each with its own figures, never pooled)."""

    INSTANCES = "instances"
    FAMILIES = "families"
    TASKS = "tasks"


#: the readings in the order every report shows them
READING_ORDER: tuple[SealedReading, ...] = (SealedReading.INSTANCES, SealedReading.FAMILIES, SealedReading.TASKS)
#: what each reading measures, in words (report headings)
READING_TITLES: dict[SealedReading, str] = {
    SealedReading.INSTANCES: "sealed instances (unseen instances of the training families: in distribution)",
    SealedReading.FAMILIES: "sealed families (families the lineage never sees: out-of-family transfer)",
    SealedReading.TASKS: "sealed tasks (hand-written tasks: transfer to a human-written set)",
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
    """What a lineage records at start about its sealed readings (frozen with the sealed split).

    Attributes:
        training_families: families searched and trained on.
        sealed_families: held-out families (their instances are all sealed).
        readings: reading -> sealed task content hashes, sorted.
        copyable: sealed-instance hashes whose reference solution equals a search instance's.
        family_of: task content hash -> family name (family instances only).
    """

    training_families: list[str] = Field(default_factory=list)
    sealed_families: list[str] = Field(default_factory=list)
    readings: dict[SealedReading, list[str]] = Field(default_factory=dict)
    copyable: list[str] = Field(default_factory=list)
    family_of: dict[str, str] = Field(default_factory=dict)

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


def copyable_instances(solutions: Mapping[str, tuple[str, PoolSplit, str]]) -> list[str]:
    """Sealed instances whose reference solution equals a search instance's of the same family.

    Args:
        solutions: task hash -> ``(family, split, sha256 of solution/solve.sh)``.

    Returns:
        the copyable sealed task hashes, sorted.
    """
    on_search = {(family, sha) for family, split, sha in solutions.values() if split == PoolSplit.SEARCH}
    return sorted(
        h for h, (family, split, sha) in solutions.items() if split == PoolSplit.SEALED and (family, sha) in on_search
    )


def classify_sealed(
    sealed: Iterable[str], family_of: Mapping[str, str], sealed_families: Iterable[str]
) -> dict[SealedReading, list[str]]:
    """The reading each sealed task belongs to.

    Args:
        sealed: the sealed split's task hashes.
        family_of: task hash -> family name, for family instances.
        sealed_families: held-out families.

    Returns:
        reading -> sorted task hashes (every reading present, possibly empty): an instance
        of a held-out family is read as *sealed families*, of a training family as
        *sealed instances*, and any other task as *sealed tasks*.
    """
    held_out = set(sealed_families)
    out: dict[SealedReading, list[str]] = {r: [] for r in READING_ORDER}
    for task_hash in sorted(set(sealed)):
        family = family_of.get(task_hash)
        if family is None:
            out[SealedReading.TASKS].append(task_hash)
        elif family in held_out:
            out[SealedReading.FAMILIES].append(task_hash)
        else:
            out[SealedReading.INSTANCES].append(task_hash)
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
