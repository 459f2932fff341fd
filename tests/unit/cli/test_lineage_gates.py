"""``lineage start`` prints each split's size and each gate's power, and refuses a gate that cannot pass."""

from __future__ import annotations

import pytest

from mindforge.cli.lineage import build_spec, split_config
from mindforge.cli.quickstart import MAIN_JOB_TASKS
from mindforge.errors import InputError
from tests.conftest import REPO, require_module

TASKS = [REPO / "tasks" / "micro" / t for t in MAIN_JOB_TASKS]  # 20 tasks: 10 / 5 / 5


def _build(splits, stages: str = "expansion,update", say=None):
    return build_spec(
        "gates", TASKS, REPO / "hcp_contracts" / "tiny.toml", 1, 2, splits, 0, None, stages, 16, "tiny", say=say,
    )


def test_start_prints_split_sizes_and_each_gates_minimum_detectable_lift(settings):
    require_module("transformers")
    lines: list[str] = []
    spec = _build(split_config(0.25, 0.25, 5), say=lines.append)
    assert lines[0] == "splits: search 10 tasks, selection 5 tasks, sealed 5 tasks"
    successor, promotion = lines[1], lines[2]
    # two candidates race, 2 attempts each on 5 tasks, each judged at 97.5% (Bonferroni): 3 of 5 tasks with a pass
    assert (
        successor.startswith("successor gate: 2 attempt(s) on each of 5 selection tasks")
        and "3 of 5 tasks" in successor and "97.5% (Bonferroni over 2 candidates)" in successor
    )
    assert "the smallest lift it detects with 80% power is 0.43 (exact binomial)" in successor
    assert "the race stops once its outcome is settled" in lines[3]
    assert promotion.startswith("promotion gate: 2 attempt(s)") and "80% power is 0.43" in promotion
    assert "simulated, 1000 draws, seed 0" in promotion
    assert spec.update.promotion_margin == 0.0


def test_a_gate_that_cannot_pass_is_refused_naming_the_option_and_the_numbers(settings):
    require_module("transformers")
    with pytest.raises(InputError, match=r"--min-split-tasks: .*needs at least 6 paired selection tasks but the "
                                         r"selection split holds 5: it could never pass"):
        _build(split_config(0.25, 0.25, 6, allow_small=True))
    with pytest.raises(InputError, match="--selection: .*holds 0 tasks"):
        _build(split_config(0.0, 0.25, 5, allow_small=True))
    # a gate on fewer than 5 paired tasks is refused at start, naming the option and the minimum
    with pytest.raises(InputError, match=r"--min-split-tasks: .*as few as 1 paired selection task\(s\); a gate "
                                         r"needs at least 5"):
        _build(split_config(0.25, 0.25, 1))
    # no gate runs without search and Update: nothing to refuse
    _build(split_config(0.0, 0.25, 5, allow_small=True), stages="discovery")


def test_the_selection_split_is_sized_for_the_target_lift_and_says_so(settings):
    require_module("transformers")
    from mindforge.cli.curriculum import curriculum_spec

    sized = {}
    for lift in (0.10, 0.25):
        lines: list[str] = []
        drawn = curriculum_spec(
            f"lift-{lift}", REPO / "tasks" / "families", instances=3, sealed_families=2, sealed_fraction=0.25,
            selection_instances=None, seed=0,
        )
        spec = build_spec(
            f"lift-{lift}", [], REPO / "hcp_contracts" / "tiny.toml", 1, 2, split_config(0.25, 0.25, 5), 0, None,
            "expansion,update", 16, "tiny", say=lines.append, curriculum=drawn, power_baseline=0.0, target_lift=lift,
        )
        sized[lift] = spec.curriculum.selection_instances
        assert (
            lines[0].startswith("selection sized by power") and f"power to detect a lift of {lift:.2f} over" in lines[0]
        )
    assert sized[0.25] < sized[0.10]
