"""No task family restates a bundled task: no rendered reference solution (the example and every
one-parameter variant) has the command shape of a bundled task's reference solution."""

from __future__ import annotations

import pytest

from mindforge.discovery.families import load_families
from mindforge.settings import REPO_ROOT
from mindforge.tasks.shape import command_shape
from tests.unit.discovery.test_families import variants

BUNDLED = {
    p.parent.parent.relative_to(REPO_ROOT / "tasks").as_posix(): command_shape(p.read_text(encoding="utf-8"))
    for p in (REPO_ROOT / "tasks").glob("**/solution/solve.sh")
    if "families" not in p.relative_to(REPO_ROOT / "tasks").parts
}
FAMILIES = load_families()


def test_the_shape_abstracts_paths_and_literals_but_not_options():
    assert command_shape("wc -w < /app/a.txt > /app/n.txt") == command_shape("wc -w < /x/essay > /y/out")
    assert command_shape("wc -w < /app/a.txt") != command_shape("wc -l < /app/a.txt")
    assert command_shape("tar -xzf a.tgz -C out") == command_shape("mkdir -p out\ntar -C out -x -z -f b.tgz")
    assert command_shape("cat > /app/s.sh <<'SH'\necho hi | wc -l\nSH\nchmod 755 /app/s.sh") == (
        ("cat", frozenset()), ("chmod", frozenset()))


def test_bundled_solutions_are_found():
    assert len(BUNDLED) >= 60 and all(BUNDLED.values())


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_no_family_solution_has_a_bundled_shape(name):
    family = FAMILIES[name]
    for params in variants(family):
        shape = command_shape(family.render(params).solve_sh)
        same = [task for task, bundled in BUNDLED.items() if bundled == shape]
        assert not same, f"{name} {params}: solution shape {shape} equals bundled {same}"
