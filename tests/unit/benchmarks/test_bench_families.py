"""The benchmark-only task families (benchmarks/families): apart from the bundled tasks, loadable, renderable,
drawn by the product's sampler, and unlike any bundled solution (pure: no Docker)."""

from __future__ import annotations

import pytest

from benchmarks.rollout_parts import DRAW_SEED, FAMILIES, draw_task_set
from mindforge.discovery.families import LEVELS, load_families
from mindforge.discovery.materialise import materialise
from mindforge.discovery.sampling import sample_instances, sample_pool
from mindforge.settings import REPO_ROOT
from mindforge.tasks.dockerfile import MARKER
from mindforge.tasks.loader import load_task
from mindforge.tasks.shape import command_shape
from tests.unit.discovery.test_families import variants

BENCH = load_families(FAMILIES)
BUNDLED_FAMILIES = load_families()
#: the command shape of every bundled reference solution: tasks and families' examples and variants
BUNDLED_SHAPES = {
    **{p.parent.parent.relative_to(REPO_ROOT).as_posix(): command_shape(p.read_text(encoding="utf-8"))
       for p in (REPO_ROOT / "tasks").glob("**/solution/solve.sh") if "families" not in p.parts},
    **{f"tasks/families/{name} {params}": command_shape(family.render(params).solve_sh)
       for name, family in BUNDLED_FAMILIES.items() for params in variants(family)},
}


def test_the_families_live_outside_the_bundled_tasks() -> None:
    assert len(BENCH) >= 2
    assert not FAMILIES.resolve().is_relative_to((REPO_ROOT / "tasks").resolve())
    bundled = {p.parent.name for p in (REPO_ROOT / "tasks").rglob("family.toml")}
    assert bundled and not set(BENCH) & bundled


@pytest.mark.parametrize("name", sorted(BENCH))
def test_every_variant_renders_a_loadable_instance_sharing_the_family_image(name, tmp_path) -> None:
    family = BENCH[name]
    for i, params in enumerate(variants(family)):
        proposal = family.render(params)
        task = load_task(materialise(proposal, tmp_path / str(i), metadata={"family": name, "family_params": params}))
        assert task.family == name and "%%" not in task.instruction and "%%" not in proposal.solve_sh
        assert MARKER in proposal.dockerfile  # instances build one image per family, make their data at start
        inputs = proposal.files["inputs"]
        assert proposal.test_files["inputs"] == inputs  # the verifier recomputes the truth from the same script
        compile(inputs, f"{name}/inputs", "exec")  # the rendered generator is Python


@pytest.mark.parametrize("name", sorted(BENCH))
def test_the_sampler_draws_every_level_and_enough_unique_instances(name) -> None:
    family = BENCH[name]
    sample = sample_instances(family, 24, seed=DRAW_SEED)
    assert len(sample.instances) == 24 and not sample.warnings
    assert set(sample.level_counts()) == set(LEVELS)
    assert len({family.difficulty(i.params)[0] for i in sample.instances}) > 1


@pytest.mark.parametrize("name", sorted(BENCH))
def test_no_solution_has_the_shape_of_a_bundled_one(name) -> None:
    family = BENCH[name]
    for params in variants(family):
        shape = command_shape(family.render(params).solve_sh)
        same = [where for where, bundled in BUNDLED_SHAPES.items() if bundled == shape]
        assert not same, f"{name} {params}: solution shape {shape} equals {same}"


def test_the_task_set_is_seeded_and_its_sides_are_disjoint(tmp_path) -> None:
    fixed, search = draw_task_set(tmp_path / "a", 24, 12)
    again, _ = draw_task_set(tmp_path / "b", 24, 12)
    assert len(fixed) == 24 and len(search) == 12
    assert [t.content_hash for t in fixed] == [t.content_hash for t in again]
    assert not {t.content_hash for t in fixed} & {t.content_hash for t in search}
    assert {t.family for t in fixed} == set(BENCH) == {t.family for t in search}
    assert sum(len(s.instances) for s in sample_pool(BENCH, 36, seed=DRAW_SEED).values()) == 36
