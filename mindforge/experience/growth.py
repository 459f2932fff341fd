"""Growing a library by one round: fold the replay verdicts into a new snapshot and a report.

One round (the seed at lineage start, or a generation's passed search-split trials) is:
mine candidates, :func:`~mindforge.experience.validation.plan_replays` against the current
snapshot, replay each planned candidate (a Ray task each), then :func:`fold_round` here:
kept entries join the snapshot, every rejection (planned or from a replay) is listed, and
:class:`GrowthReport` counts entries by provenance and rejections by reason for the report.
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, Field

from mindforge.experience.entry import ExperienceEntry, Provenance
from mindforge.experience.snapshot import ExperienceSnapshot
from mindforge.experience.validation import Rejection, RejectionReason, ReplayPlan


class GrowthReport(BaseModel):
    """What one round did to the library (a generation record's ``experience`` entry).

    Attributes:
        snapshot_id: the snapshot after the round.
        entries: its entries by provenance (``oracle``, ``model``).
        added: entries the round added, by provenance.
        rejected: the round's rejections by reason (every reason a key).
    """

    snapshot_id: str
    entries: dict[str, int] = Field(default_factory=dict)
    added: dict[str, int] = Field(default_factory=dict)
    rejected: dict[str, int] = Field(default_factory=dict)


def fold_round(
    snapshot: ExperienceSnapshot,
    plan: ReplayPlan,
    kept: list[ExperienceEntry],
    replay_rejections: list[Rejection],
) -> tuple[ExperienceSnapshot, list[Rejection], GrowthReport]:
    """The snapshot after a round, all its rejections, and its report.

    Args:
        snapshot: the library before the round.
        plan: the round's replay plan (its ``rejected`` come before any replay).
        kept: the entries whose replays all passed (validated).
        replay_rejections: the ``failed`` / ``flaky`` verdicts of the replays.

    Returns:
        (new snapshot, every rejection of the round, report).
    """
    grown = snapshot.with_entries(kept)
    rejections = [*plan.rejected, *replay_rejections]
    added = Counter(str(e.provenance) for e in kept)
    reasons = Counter(str(r.reason) for r in rejections)
    report = GrowthReport(
        snapshot_id=grown.snapshot_id,
        entries=grown.counts(),
        added={str(p): added.get(str(p), 0) for p in Provenance},
        rejected={str(r): reasons.get(str(r), 0) for r in RejectionReason},
    )
    return grown, rejections, report
