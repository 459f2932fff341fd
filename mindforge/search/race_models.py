"""Small data of the racing search: entrants, the race's progress, edit predictions, seed chains.

Pure pydantic records held in :class:`mindforge.search.state.SearchState` (every field has
a default, so states stored before the race existed still load).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from mindforge.search.candidates import Candidate
from mindforge.search.edits import Edit

#: why a candidate is on the race's shortlist
EntryReason = Literal["previous", "library", "library_variant", "cluster_best", "model", "compose", "promoted"]
EntrantStatus = Literal["racing", "dropped", "refuted"]
Verdict = Literal["untested", "confirmed", "refuted"]
#: what a planned cell is for: a race trial on the common task order, or an exploration trial
Purpose = Literal["race", "explore"]


class SeedChain(BaseModel):
    """An edit chain the search shortlists because earlier evidence names it.

    Attributes:
        edits: the chain, relative to the contract it was found from (it is re-based on
            the search root: edits that no longer apply are left out).
        reason: ``previous`` (the previous generation's search entrant or runner-up).
        note: where it came from, in words (``generation 0 entrant``).
    """

    edits: list[Edit] = Field(min_length=1)
    reason: EntryReason = "previous"
    note: str = ""


class Prediction(BaseModel):
    """What an edit states it will change, and the verdict of its trials (AHE).

    An edit (an operator edit, a model proposal, a seed) predicts that the tasks it names
    turn into passes at no less than ``min_rate``. The verdict is read from trial
    outcomes alone (:func:`mindforge.search.predictions.judge`): ``confirmed`` once a
    named task passed under it, ``refuted`` once its trials on the named tasks all
    failed and that many failures at ``min_rate`` are less likely than the search's
    ``refute_alpha``, ``untested`` until then.

    Source: Agentic Harness Engineering (AHE) - every harness edit states a prediction
    the run can prove wrong.

    Attributes:
        scope: ``targeted`` (the tasks whose audit points at the edit) or ``general``
            (every failing task: edits with no audit link, the library and seeds).
        tasks: task indices it names.
        classes: the audit clusters (``owner:rule``) of those tasks, for the report.
        level: the audit affinity level it was stated at (0 for general).
        min_rate: the pass rate it claims on the named tasks.
        trials / passes: usable trials and passes on the named tasks so far.
        verdict: ``untested``, ``confirmed`` or ``refuted``.
        step: the step the verdict was reached (None while untested).
    """

    scope: Literal["targeted", "general"]
    tasks: list[int] = Field(default_factory=list)
    classes: list[str] = Field(default_factory=list)
    level: int = 0
    min_rate: float = Field(gt=0, lt=1)
    trials: int = 0
    passes: int = 0
    verdict: Verdict = "untested"
    step: int | None = None


class Entrant(BaseModel):
    """A candidate on the race's shortlist.

    Attributes:
        candidate: the candidate (added to the state's candidates when first planned).
        reason: why it is on the shortlist.
        status: ``racing``, ``dropped`` (halved out) or ``refuted`` (its prediction failed).
        joined_step / left_step: the steps it joined and left the race.
        prediction: what it stated when it joined (None: read from the audit).
    """

    candidate: Candidate
    reason: EntryReason
    status: EntrantStatus = "racing"
    joined_step: int = 0
    left_step: int | None = None
    prediction: Prediction | None = None


class RaceProgress(BaseModel):
    """Where successive halving stands.

    Attributes:
        round: the halving round (0 = the probe round).
        quota: race trials every racing entrant must reach before the round ends (doubles
            each round, from ``probe_attempts``).
        trials: candidate index (as text) -> race trials observed.
        sources: ``race`` / ``explore`` -> ``[trials, passes]`` observed.
        compositions: composed candidates added to the race so far.
    """

    round: int = 0
    quota: int = 0
    trials: dict[str, int] = Field(default_factory=dict)
    sources: dict[str, list[int]] = Field(default_factory=dict)
    compositions: int = 0
