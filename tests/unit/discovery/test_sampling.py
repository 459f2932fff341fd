"""Drawing family instances: seeded, unique, spread over the levels, exclusions, small spaces (pure)."""

from __future__ import annotations

from collections import Counter

import pytest

from mindforge.discovery.families import load_families, load_family
from mindforge.discovery.sampling import ENUMERATE_LIMIT, sample_instances, sample_pool, space_size
from mindforge.tasks.dockerfile import MARKER
from tests.unit.discovery.tmp_families import family_doc, write_family

FAMILIES = load_families()


def ids(sample):
    return [i.instance_id for i in sample.instances]


def test_same_seed_same_instances_other_seed_others():
    family = FAMILIES["sum-by-key"]
    first = sample_instances(family, 12, seed=3)
    assert ids(first) == ids(sample_instances(family, 12, seed=3))
    assert ids(first) != ids(sample_instances(family, 12, seed=4))
    assert len(set(ids(first))) == 12 and not first.warnings
    for inst in first.instances:
        assert inst.instance_id == family.instance_id(inst.params)
        assert (inst.score, inst.level) == family.difficulty(inst.params)


def test_levels_differ_by_at_most_one():
    family = FAMILIES["sum-by-key"]  # every level holds hundreds of instances
    for n in (3, 10, 30, 31):
        counts = sample_instances(family, n, seed=1).level_counts()
        assert set(counts) == {"easy", "medium", "hard"} and sum(counts.values()) == n
        assert max(counts.values()) - min(counts.values()) <= 1, (n, counts)


def test_a_small_level_leaves_its_turns_to_the_others():
    family = FAMILIES["epoch-to-date"]  # one hard instance in all
    all_hard = [p for p in _space(family) if family.difficulty(p)[1] == "hard"]
    counts = sample_instances(family, 20, seed=0).level_counts()
    assert counts["hard"] == len(all_hard) and sum(counts.values()) == 20
    assert abs(counts["easy"] - counts["medium"]) <= 1


def _space(family):
    import itertools

    from mindforge.discovery.families import param_values

    values = param_values(family)
    return [dict(zip(values, c, strict=True)) for c in itertools.product(*values.values())]


def test_exclude_gives_disjoint_draws():
    family = FAMILIES["join-by-id"]
    first = sample_instances(family, 10, seed=5)
    more = sample_instances(family, 10, seed=5, exclude=ids(first))
    assert len(ids(more)) == 10 and not set(ids(first)) & set(ids(more))


def test_a_space_smaller_than_n_gives_what_there_is_with_a_warning():
    family = FAMILIES["env-isolated-run"]
    assert space_size(family) == 72
    sample = sample_instances(family, 100, seed=0)
    assert len(set(ids(sample))) == 72
    (warning,) = sample.warnings
    assert "env-isolated-run admits only 72 unique instances" in warning and "using 72, not 100" in warning
    assert "env-isolated-run/family.toml, schema" in warning
    rest = sample_instances(family, 10, seed=0, exclude=ids(sample)[:70])
    assert len(rest.instances) == 2 and "outside the 70 excluded" in rest.warnings[0]


def test_zero_and_negative_n():
    family = FAMILIES["sum-by-key"]
    assert sample_instances(family, 0, seed=1).instances == [] and not sample_instances(family, 0, seed=1).warnings
    with pytest.raises(ValueError, match="n must be >= 0"):
        sample_instances(family, -1, seed=1)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_bundled_family_samples_ten_instances_that_render_with_the_marker(name):
    family = FAMILIES[name]
    sample = sample_instances(family, 10, seed=11)
    assert len(set(ids(sample))) == 10 and not sample.warnings
    for inst in sample.instances:
        proposal = family.render(inst.params)
        assert proposal.task_id == inst.instance_id and MARKER in proposal.dockerfile


def test_a_large_space_is_sampled_unique_and_spread(tmp_path):
    doc = family_doc("wide", count_max=30_000)
    family = load_family(write_family(tmp_path, "wide", doc))
    assert space_size(family) > ENUMERATE_LIMIT
    sample = sample_instances(family, 30, seed=2)
    assert len(set(ids(sample))) == 30 and ids(sample) == ids(sample_instances(family, 30, seed=2))
    assert Counter(i.level for i in sample.instances) == {"easy": 10, "medium": 10, "hard": 10}


def test_pool_shares_n_over_the_families():
    pool = sample_pool(FAMILIES, 200, seed=7)
    sizes = sorted(len(s.instances) for s in pool.values())
    assert sum(sizes) == 200 and sizes[-1] - sizes[0] <= 1 and len(pool) == len(FAMILIES)
    every = [i for s in pool.values() for i in ids(s)]
    assert len(set(every)) == 200
