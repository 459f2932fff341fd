"""Common random numbers: the sampling seed a trial's model calls carry, shared by every pair on one task attempt.

Two pairs compared on a split (a candidate and the parent on selection, every pair on the
sealed split) run the same tasks with the same attempts. Giving attempt ``a`` of task
``t`` the same sampling seed under every pair couples their samples: where two policies
put nearly the same distribution on the next token, inverse-CDF sampling from the same
uniform draws picks the same token, so the pairs' outcomes differ mostly where the
policies do. That lowers the variance of a paired difference without biasing either
pair's own rate (each attempt still samples from its own policy) - the method of common
random numbers in simulation (Law & Kelton, "Simulation Modeling and Analysis", ch. 11).
Attempts of one pair keep distinct seeds, so a group of rollouts still varies; an
Update's rollouts are seeded by their trial ids (a fresh seed per iteration and draw).

Pure: stdlib only.
"""

from __future__ import annotations

import hashlib

#: stages whose trials pair across pairs on (task, attempt)
PAIRED_STAGES = frozenset({"expansion", "search", "selection", "sealed"})


def paired_seed(lineage_id: str, stage: str, task_hash: str, attempt: int, trial_id: str = "") -> int:
    """The sampling seed of one trial: common to every pair on the same task attempt of a paired stage.

    Args:
        lineage_id: the lineage (seeds differ between lineages).
        stage: the trial stage (``selection``, ``sealed``, ...).
        task_hash: the task's content hash.
        attempt: the attempt index within the task's group.
        trial_id: the trial's id; used instead of the task attempt for stages that are not
            paired (an Update's rollouts: every draw gets its own seeds).

    Returns:
        a seed in ``[0, 2**31)``.
    """
    key = f"{lineage_id}:{stage}:{task_hash}:{attempt}" if stage in PAIRED_STAGES else f"{lineage_id}:{trial_id}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % (1 << 31)
