"""A user's worked example that restates a curriculum family's solution is refused (held-out families too)."""

from __future__ import annotations

import pytest

from mindforge.cli.examples_check import check_examples, pool_solutions
from mindforge.errors import InputError
from mindforge.hcp import WorkedExample
from mindforge.payloads import CurriculumSpec
from tests.conftest import REPO

FAMILIES = REPO / "tests" / "fixtures" / "families"


def _example(name: str, command: str) -> WorkedExample:
    return WorkedExample.model_validate({"name": name, "instruction": "x", "steps": [{"command": command}]})


def test_a_family_solution_restated_by_an_example_is_refused(tmp_path) -> None:
    curriculum = CurriculumSpec(
        families_dir=str(FAMILIES), families=["fx-copy", "fx-upper"], sealed_families=["fx-copy"]
    )
    solutions = pool_solutions([], curriculum)
    assert set(solutions) == {"family fx-copy", "family fx-upper"}
    check_examples(tmp_path, [_example("listing", "ls -la /srv")], solutions)  # unrelated: fine
    with pytest.raises(InputError, match=r"copying\.toml: steps: .*family fx-copy"):
        check_examples(tmp_path, [_example("copying", "cp /tmp/a.txt /tmp/b.txt")], solutions)


def test_a_root_contract_carrying_a_pool_tasks_answer_is_refused(tmp_path) -> None:
    """Worked examples in the root contract (e.g. another lineage's successor) are checked like --examples."""
    from mindforge.cli.examples_check import check_contract
    from mindforge.hcp import derive, load_contract

    root = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    carrying = derive(root, revision="x", edit="examples from another lineage", changes={
        "resources.examples": [{"name": "copy_it", "instruction": "x", "steps": [{"command": "cp a b"}]}],
    })
    solutions = pool_solutions([], CurriculumSpec(families_dir=str(FAMILIES), families=["fx-copy"]))
    called: list[int] = []
    check_contract(tmp_path / "root.toml", root, lambda: called.append(1) or solutions)
    assert called == []  # a contract that carries nothing costs no pool scan
    with pytest.raises(InputError, match=r"root\.toml: resources\.examples\[0\]: .*family fx-copy"):
        check_contract(tmp_path / "root.toml", carrying, lambda: solutions)
