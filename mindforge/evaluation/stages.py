"""The one rule that ties a trial's stage to its task's split, and the error that enforces it.

Evidence rests on it (docs/design.md, "Three splits"): ``expansion``, ``search`` and
``rollout`` trials run on search tasks only (base evaluation, configuration search and
the GRPO rollouts read nothing else), ``selection`` trials on selection tasks only (the
decisions), ``sealed`` trials on sealed tasks only (the reported lift). Readers trust
that a stored stage implies its split, so the rule is checked where trials are planned
(the ``plan_*`` activities), where a batch is run (``run_trials``) and where a trial is
stored (:func:`mindforge.store.trials.insert_trial`).

Pure: stdlib only.
"""

from __future__ import annotations

from mindforge.domain import TrialStage
from mindforge.errors import MindForgeError
from mindforge.evaluation.splits import PoolSplit

_SPLIT_OF_STAGE: dict[TrialStage, PoolSplit] = {
    TrialStage.EXPANSION: PoolSplit.SEARCH,
    TrialStage.SEARCH: PoolSplit.SEARCH,
    TrialStage.ROLLOUT: PoolSplit.SEARCH,
    TrialStage.SELECTION: PoolSplit.SELECTION,
    TrialStage.SEALED: PoolSplit.SEALED,
}


class StageSplitError(MindForgeError):
    """A trial's stage and its task's split disagree (e.g. a sealed task in a search batch).

    Never retryable: the plan is wrong, not the infrastructure.

    Attributes:
        trial_id: the trial.
        stage: the stage it was planned, run or stored under.
        split: the split its task is on in the lineage's pool (None = in no split).
        task_hash: the task's content hash.
    """

    def __init__(self, *, trial_id: str, stage: TrialStage, split: PoolSplit | None, task_hash: str) -> None:
        self.trial_id, self.stage, self.split, self.task_hash = trial_id, stage, split, task_hash
        on = f"on the {split.value} split" if split is not None else "on no split of the lineage's pool"
        super().__init__(
            f"trial {trial_id}: stage {stage.value!r} runs on {split_of_stage(stage).value} tasks only, "
            f"but its task {task_hash} is {on}"
        )


def split_of_stage(stage: TrialStage) -> PoolSplit:
    """The split every task of a trial in ``stage`` must be on.

    Args:
        stage: a lineage trial's stage.

    Returns:
        ``search`` for expansion, search and rollout; ``selection`` for selection;
        ``sealed`` for sealed.
    """
    return _SPLIT_OF_STAGE[TrialStage(stage)]


def check_stage_split(*, trial_id: str, stage: TrialStage, split: PoolSplit | None, task_hash: str) -> None:
    """Raise unless a trial in ``stage`` may run on a task of ``split``.

    Args:
        trial_id: the trial (named in the error).
        stage: its stage.
        split: its task's split in the lineage's pool (None = the task is in no split,
            which no lineage stage may run).
        task_hash: its task's content hash (named in the error).

    Raises:
        StageSplitError: the split is not :func:`split_of_stage` of the stage.
    """
    if split is None or PoolSplit(split) != split_of_stage(stage):
        raise StageSplitError(trial_id=trial_id, stage=TrialStage(stage), split=split, task_hash=task_hash)
