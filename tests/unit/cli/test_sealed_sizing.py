"""The main job sizes its sealed-instances attempts by the reading's power, and says so."""

from __future__ import annotations

from types import SimpleNamespace

from mindforge.cli.curriculum import size_sealed_instances
from mindforge.payloads import CurriculumSpec, EvaluationSpec


def _spec(families: int, held_out: int, instances: int = 3, sealed_fraction: float = 0.25) -> SimpleNamespace:
    names = [f"fam-{i:02d}" for i in range(families)]
    curriculum = CurriculumSpec(
        families_dir="/families", families=names, instances=instances, selection_instances=1,
        sealed_fraction=sealed_fraction, sealed_families=names[:held_out], seed=0,
    )
    return SimpleNamespace(curriculum=curriculum, evaluation=EvaluationSpec(sealed_attempts=1))


def test_the_main_job_pool_gets_three_attempts_on_its_twelve_instances() -> None:
    spec = _spec(14, 2)  # the main job: 14 families, 2 held out, 1 of 3 instances sealed
    line = size_sealed_instances(spec, lift=0.25)
    assert spec.evaluation.sealed_instance_attempts == 3
    assert line.startswith("sealed instances sized by power: 3 attempt(s) on each of 12 tasks (12 families)")
    assert "83% of runs" in line and "other sealed readings: 1 attempt(s)" in line


def test_a_target_out_of_reach_takes_the_cap_and_says_so() -> None:
    spec = _spec(14, 2)
    line = size_sealed_instances(spec, lift=0.10)
    assert spec.evaluation.sealed_instance_attempts == 4 and "80% is not reached at 4" in line


def test_too_few_families_leave_the_attempts_as_set() -> None:
    spec = _spec(3, 2)  # one training family: no interval by family to size
    assert "too few to size by power" in size_sealed_instances(spec, lift=0.25)
    assert spec.evaluation.sealed_instance_attempts is None
