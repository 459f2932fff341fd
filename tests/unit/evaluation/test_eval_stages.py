"""The stage -> split rule: every trial stage runs on exactly one split, and a mismatch names trial, stage and split."""

from __future__ import annotations

import pytest

from mindforge.domain import TrialStage
from mindforge.evaluation import PoolSplit, StageSplitError, check_stage_split, split_of_stage


def test_every_stage_has_its_split() -> None:
    assert {stage: split_of_stage(stage) for stage in TrialStage} == {
        TrialStage.EXPANSION: PoolSplit.SEARCH,
        TrialStage.SEARCH: PoolSplit.SEARCH,
        TrialStage.ROLLOUT: PoolSplit.SEARCH,
        TrialStage.SELECTION: PoolSplit.SELECTION,
        TrialStage.SEALED: PoolSplit.SEALED,
    }
    # the stage as stored (a string) maps the same way
    assert split_of_stage("rollout") is PoolSplit.SEARCH  # type: ignore[arg-type] - a wrong stage on purpose


@pytest.mark.parametrize("stage", list(TrialStage))
@pytest.mark.parametrize("split", [*PoolSplit, None])
def test_check_accepts_exactly_the_stages_split(stage: TrialStage, split: PoolSplit | None) -> None:
    if split is not None and split_of_stage(stage) is split:
        check_stage_split(trial_id="t-1", stage=stage, split=split, task_hash="h1")
        return
    with pytest.raises(StageSplitError) as caught:
        check_stage_split(trial_id="t-1", stage=stage, split=split, task_hash="h1")
    err = caught.value
    assert (err.trial_id, err.stage, err.split, err.task_hash) == ("t-1", stage, split, "h1")
    message = str(err)
    assert "t-1" in message and repr(stage.value) in message and "h1" in message
    assert (split.value if split is not None else "no split") in message
