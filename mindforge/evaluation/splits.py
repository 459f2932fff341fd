"""The three splits of a lineage's task pool, and how a task is assigned to one.

Each lineage splits its pool once (docs/design.md, "Three splits"):

- ``search``: Expansion's base evaluation, the failure audit, configuration search and
  the GRPO training selection;
- ``selection``: every decision - the successor contract, the adapter promotion gate;
- ``sealed``: only measurement - the cross-generation lift in the report. No decision of
  any stage reads a sealed trial: a best-of-N choice scored on the set it was chosen on
  looks better than it is (the winner's curse).

Assignment is deterministic and never revisited: a task's place in the order is the
sha256 of ``"<split key>:<task content hash>"`` (the split key is the lineage id), and
the split sizes follow the fractions *within each task category* (``task.toml``
``metadata.category``; tasks without one share ``uncategorized``), with the leftover of
rounding given to the categories with the largest remainders so the pool as a whole lands
on the fractions too (stratified largest-remainder allocation). Tasks that join later
(Discovery admissions) are assigned by the same function, given how many tasks of their
category each split holds already; tasks already in the pool never move.

The sealed split is frozen when the lineage starts (docs/design.md, "Compounding"):
every generation's pair runs the same sealed tasks, so a later task never joins it.
Admitted tasks are placed with :func:`admission_config`: the lineage's selection fraction
of the whole pool goes to selection, the rest to search, and none to sealed.

Pure: stdlib and pydantic only.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mindforge.errors import MindForgeError

#: the category of a task whose task.toml names none
UNCATEGORIZED = "uncategorized"


class PoolSplit(StrEnum):
    """Which split of a lineage's pool a task is on (see the module docstring)."""

    SEARCH = "search"
    SELECTION = "selection"
    SEALED = "sealed"


class SplitConfig(BaseModel):
    """How a lineage splits its pool.

    Attributes:
        selection_fraction: share of the pool on the selection split, in [0, 1).
        sealed_fraction: share of the pool on the sealed split, in [0, 1).
        min_tasks: the fewest tasks each split must hold at lineage start.
        allow_small_splits: start even when a split holds fewer than ``min_tasks`` tasks
            (the report flags such a lineage); otherwise that is an error.
        overrides: task id -> split, pinning tasks (e.g. a benchmark's official test
            tasks on ``sealed``); pinned tasks count towards their category's quotas.
    """

    model_config = ConfigDict(frozen=True)

    selection_fraction: float = Field(default=0.2, ge=0.0, lt=1.0)
    sealed_fraction: float = Field(default=0.2, ge=0.0, lt=1.0)
    min_tasks: int = Field(default=5, ge=0)
    allow_small_splits: bool = False
    overrides: dict[str, PoolSplit] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _room_for_search(self) -> SplitConfig:
        if self.selection_fraction + self.sealed_fraction >= 1.0:
            raise ValueError(
                f"selection ({self.selection_fraction}) + sealed ({self.sealed_fraction}) fractions must leave "
                "room for the search split (sum below 1)"
            )
        return self


class SplitCandidate(BaseModel):
    """A task to place on a split: its content hash, id and category."""

    task_hash: str
    task_id: str = ""
    category: str = UNCATEGORIZED


class SplitTooSmallError(MindForgeError):
    """A split holds fewer tasks than the lineage's minimum.

    Attributes:
        split: the first split found too small.
        size / minimum: its size and the required minimum.
        counts: tasks per split.
    """

    def __init__(self, split: PoolSplit, size: int, minimum: int, counts: Mapping[PoolSplit, int]) -> None:
        self.split, self.size, self.minimum = split, size, minimum
        self.counts = dict(counts)
        shown = ", ".join(f"{s.value} {self.counts.get(s, 0)}" for s in PoolSplit)
        super().__init__(
            f"the {split.value} split would hold {size} task(s), fewer than the minimum of {minimum} "
            f"(pool of {sum(self.counts.values())}: {shown}); add tasks, change --selection/--sealed, "
            "or pass --allow-small-splits (the report flags the lineage)"
        )


def order_key(split_key: str, task_hash: str) -> str:
    """A task's place in the assignment order: sha256 hex of ``"<split_key>:<task_hash>"``."""
    return hashlib.sha256(f"{split_key}:{task_hash}".encode()).hexdigest()


def _allocate(sizes: dict[str, int], fraction: float, held: dict[str, int], free: dict[str, int]) -> dict[str, int]:
    """How many new tasks of each category one split takes (stratified, largest remainder).

    Each category's target is ``size * fraction`` rounded down; the tasks left over so that
    the pool as a whole reaches ``round(total * fraction)`` go to the categories with the
    largest remainders (ties: category name). A category never gives back tasks it holds
    (``held``) and cannot give more than it has free (``free``).
    """
    raw = {c: n * fraction for c, n in sizes.items()}
    target = {c: math.floor(v) for c, v in raw.items()}
    leftover = round(sum(raw.values())) - sum(target.values())
    for c in sorted(raw, key=lambda c: (-(raw[c] - target[c]), c)):
        if leftover <= 0:
            break
        if target[c] - held.get(c, 0) < free.get(c, 0):
            target[c] += 1
            leftover -= 1
    return {c: max(0, min(free.get(c, 0), target[c] - held.get(c, 0))) for c in sizes}


def assign_splits(
    tasks: Iterable[SplitCandidate],
    config: SplitConfig,
    *,
    split_key: str,
    existing: Mapping[str, Mapping[PoolSplit, int]] | None = None,
) -> dict[str, PoolSplit]:
    """Place new tasks on the three splits, stratified by category.

    Sealed first, then selection: each split's share of every category is
    ``(existing + new) * fraction`` rounded down, and the tasks left over so that the
    whole pool lands on ``round(total * fraction)`` go to the categories with the largest
    remainders (largest-remainder stratified allocation), minus what the split holds
    already, never below zero. Within a category the new tasks are taken in
    :func:`order_key` order; the rest go to search. Pinned tasks (``config.overrides``,
    by task id) keep their split and count as already placed. The result depends only
    on the tasks, the config, the key and the existing counts - not on the order the
    tasks are given in.

    Args:
        tasks: the tasks to place (a hash given twice is placed once).
        config: fractions and overrides.
        split_key: the lineage id (or another stable key of the lineage).
        existing: category -> split -> tasks of that category already in the pool.

    Returns:
        task hash -> split, for every given task.
    """
    existing = existing or {}
    free: dict[str, list[SplitCandidate]] = defaultdict(list)
    held: dict[PoolSplit, dict[str, int]] = {s: defaultdict(int) for s in PoolSplit}
    for category, per_split in existing.items():
        for split, n in per_split.items():
            held[PoolSplit(split)][category] += n
    out: dict[str, PoolSplit] = {}
    seen: set[str] = set()
    for task in tasks:
        if task.task_hash in seen:
            continue
        seen.add(task.task_hash)
        category = task.category or UNCATEGORIZED
        pinned = config.overrides.get(task.task_id)
        if pinned is not None:
            out[task.task_hash] = PoolSplit(pinned)
            held[PoolSplit(pinned)][category] += 1
        else:
            free[category].append(task)
    for members in free.values():
        members.sort(key=lambda t: order_key(split_key, t.task_hash))
    categories = set(free) | {c for per in held.values() for c in per}
    sizes = {c: sum(held[s].get(c, 0) for s in PoolSplit) + len(free.get(c, [])) for c in categories}
    fractions = ((PoolSplit.SEALED, config.sealed_fraction), (PoolSplit.SELECTION, config.selection_fraction))
    for split, fraction in fractions:
        take = _allocate(sizes, fraction, held[split], {c: len(v) for c, v in free.items()})
        for category, n in take.items():
            for task in free.get(category, [])[:n]:
                out[task.task_hash] = split
            if n:
                free[category] = free[category][n:]
    for members in free.values():
        for task in members:
            out[task.task_hash] = PoolSplit.SEARCH
    return out


def admission_config(config: SplitConfig) -> SplitConfig:
    """The split config for tasks that join a running lineage (Discovery): the sealed split stays frozen.

    The sealed fraction becomes 0 and pins to ``sealed`` are dropped (such a task goes
    to selection or search like any other), so :func:`assign_splits` places a joining
    task on search or selection only; the selection split keeps its share of the whole
    pool (sealed tasks counted in the pool's size).

    Args:
        config: the lineage's split config.

    Returns:
        the same config with no room on the sealed split.
    """
    overrides = {task: split for task, split in config.overrides.items() if PoolSplit(split) != PoolSplit.SEALED}
    return config.model_copy(update={"sealed_fraction": 0.0, "overrides": overrides})


def split_counts(assignment: Mapping[str, PoolSplit]) -> dict[PoolSplit, int]:
    """Tasks per split (every split present, possibly 0)."""
    counts = {s: 0 for s in PoolSplit}
    for split in assignment.values():
        counts[PoolSplit(split)] += 1
    return counts


def check_split_sizes(counts: Mapping[PoolSplit, int], config: SplitConfig) -> list[str]:
    """Check each split against ``config.min_tasks``.

    A split whose fraction is 0 (and that nothing was pinned to) is meant to be empty
    and is not checked.

    Args:
        counts: tasks per split.
        config: the minimum and whether small splits are allowed.

    Returns:
        one warning per split below the minimum (only when ``allow_small_splits``).

    Raises:
        SplitTooSmallError: a split is below the minimum and small splits are not allowed.
    """
    wanted = {
        PoolSplit.SEARCH: True,
        PoolSplit.SELECTION: config.selection_fraction > 0 or PoolSplit.SELECTION in config.overrides.values(),
        PoolSplit.SEALED: config.sealed_fraction > 0 or PoolSplit.SEALED in config.overrides.values(),
    }
    warnings = []
    for split in PoolSplit:
        size = counts.get(split, 0)
        if wanted[split] and size < config.min_tasks:
            if not config.allow_small_splits:
                raise SplitTooSmallError(split, size, config.min_tasks, counts)
            warnings.append(f"{split.value} split holds {size} task(s), below the minimum of {config.min_tasks}")
    return warnings
