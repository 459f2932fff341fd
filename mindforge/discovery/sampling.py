"""Drawing many instances of a task family: seeded, unique, spread over the difficulty levels.

Pure (no Docker, no Temporal, no Ray, no store). :func:`sample_instances` draws ``n``
instances of one family:

* **seeded**: the same family, ``n``, ``seed`` and ``exclude`` give the same instances in
  the same order; the generator is seeded from sha256 of the family's name and the seed
  (never Python's salted ``hash()``);
* **unique** by canonical parameters (:meth:`~mindforge.discovery.families.Family.instance_id`);
  ``exclude`` holds instance ids not to return, so a caller can draw more instances
  disjoint from the ones it has;
* **spread over the levels**: round-robin over the difficulty levels the family can reach
  (easy, medium, hard), each level's candidates shuffled, so level counts differ by at most
  one while every level has enough instances (a level that runs out leaves its turns to the
  others).

Candidates: a parameter space of at most :data:`ENUMERATE_LIMIT` points (the product of
the enum and boolean values and the integer ranges) is enumerated; a larger one is
sampled (:data:`DRAWS_PER_INSTANCE` uniform draws per instance asked for, at least
:data:`MIN_DRAWS`, deduplicated and bucketed by level). A space holding fewer unique
instances than asked for gives what there is, with a warning naming ``family.toml``.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from collections.abc import Collection, Iterator, Mapping
from typing import Any

import jsonschema
from pydantic import BaseModel, Field

from mindforge.discovery.families import FAMILY_TOML, LEVELS, Family, param_values

#: parameter spaces up to this many points are enumerated, larger ones sampled
ENUMERATE_LIMIT = 20_000
#: uniform draws per instance asked for, in a sampled space
DRAWS_PER_INSTANCE = 50
#: the fewest draws in a sampled space
MIN_DRAWS = 2_000


class Instance(BaseModel):
    """One drawn instance.

    Attributes:
        params: its parameters (valid under the family's schema).
        instance_id: ``family.instance_id(params)``.
        score: its difficulty score.
        level: its difficulty level (one of :data:`~mindforge.discovery.families.LEVELS`).
    """

    params: dict[str, Any]
    instance_id: str
    score: float
    level: str


class InstanceSample(BaseModel):
    """The instances drawn from one family.

    Attributes:
        family: the family's name.
        instances: the instances, in draw order (round-robin over the levels).
        warnings: what the caller should know (fewer instances than asked for, ...).
    """

    family: str
    instances: list[Instance] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    def level_counts(self) -> dict[str, int]:
        """Level -> instances drawn at it (levels with none left out)."""
        counts: dict[str, int] = {}
        for inst in self.instances:
            counts[inst.level] = counts.get(inst.level, 0) + 1
        return counts


def space_size(family: Family) -> int:
    """Points of the family's parameter space (the product of the parameters' value counts)."""
    return math.prod(len(v) for v in param_values(family).values())


def family_rng(family: Family, seed: int) -> random.Random:
    """The generator of one draw: seeded from sha256 of the family's name and ``seed``."""
    digest = hashlib.sha256(f"{family.name}\0{seed}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _candidates(family: Family, n: int, rng: random.Random) -> tuple[Iterator[dict[str, Any]], bool]:
    """Candidate parameters and whether they are the whole space (enumerated)."""
    values = param_values(family)
    keys = list(values)
    if space_size(family) <= ENUMERATE_LIMIT:
        return (dict(zip(keys, combo, strict=True)) for combo in itertools.product(*values.values())), True
    draws = max(MIN_DRAWS, DRAWS_PER_INSTANCE * n)
    return ({k: rng.choice(values[k]) for k in keys} for _ in range(draws)), False


def sample_instances(family: Family, n: int, *, seed: int, exclude: Collection[str] = ()) -> InstanceSample:
    """Draw ``n`` unique instances of ``family``, spread over its difficulty levels.

    Args:
        family: the family.
        n: instances wanted (>= 0).
        seed: the draw's seed (with the family's name, it seeds the generator).
        exclude: instance ids not to return.

    Returns:
        The sample: at most ``n`` instances, fewer (with a warning) when the space holds
        fewer unique ones outside ``exclude``.

    Raises:
        ValueError: ``n`` < 0.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    out = InstanceSample(family=family.name)
    if n == 0:
        return out
    rng = family_rng(family, seed)
    candidates, whole = _candidates(family, n, rng)
    buckets: dict[str, dict[str, dict[str, Any]]] = {level: {} for level in LEVELS}
    excluded = set(exclude)
    for params in candidates:
        iid = family.instance_id(params)
        if iid not in excluded:
            buckets[family.difficulty(params)[1]].setdefault(iid, params)
    queues = [list(found.items()) for found in buckets.values()]  # in LEVELS order
    for queue in queues:
        rng.shuffle(queue)
    # the shape check of load_family leaves keywords such as "not" or "if" possible: check what is taken
    validator = jsonschema.Draft202012Validator(family.params_schema)
    while len(out.instances) < n and any(queues):
        for level, queue in zip(LEVELS, queues, strict=True):
            while queue and len(out.instances) < n:
                iid, params = queue.pop()
                if validator.is_valid(params):
                    score = family.difficulty(params)[0]
                    out.instances.append(Instance(params=params, instance_id=iid, score=score, level=level))
                    break
    if len(out.instances) < n:
        out.warnings.append(_short_warning(family, n, len(out.instances), len(excluded), whole))
    return out


def _short_warning(family: Family, n: int, got: int, excluded: int, whole: bool) -> str:
    where = f"{family.root / FAMILY_TOML}, schema"
    after = f" outside the {excluded} excluded" if excluded else ""
    if whole:
        return f"family {family.name} admits only {got} unique instances{after} ({where}): using {got}, not {n}"
    return (
        f"family {family.name}: {max(MIN_DRAWS, DRAWS_PER_INSTANCE * n)} draws found only {got} unique "
        f"instances{after} ({where}): using {got}, not {n}"
    )


def sample_pool(
    families: Mapping[str, Family], n: int, *, seed: int, exclude: Collection[str] = ()
) -> dict[str, InstanceSample]:
    """Draw ``n`` instances in all over ``families``, shared as evenly as the families allow.

    Each family (in name order) gets ``n // len(families)`` and the first ``n % len``
    one more; what a small family cannot give goes to the others, in name order.

    Args:
        families: the families, by name.
        n: instances wanted in all (>= 0).
        seed: the draw's seed (each family's generator also takes its name).
        exclude: instance ids not to return.

    Returns:
        Family name -> its sample (warnings included).

    Raises:
        ValueError: ``n`` < 0, or no families.
    """
    if not families:
        raise ValueError("no families to sample from")
    names = sorted(families)
    share = {name: n // len(names) + (i < n % len(names)) for i, name in enumerate(names)}
    out = {name: sample_instances(families[name], share[name], seed=seed, exclude=exclude) for name in names}
    missing = n - sum(len(s.instances) for s in out.values())
    for name in names:
        if missing <= 0:
            break
        taken = {i.instance_id for i in out[name].instances}
        more = sample_instances(families[name], missing, seed=seed + 1, exclude={*exclude, *taken})
        out[name].instances.extend(more.instances)
        missing -= len(more.instances)
    return out
