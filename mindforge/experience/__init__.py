"""A lineage's experience library: validated search-split experience, retrieved per task.

Pure core (no Temporal, no Ray, no store). The parts:

- :mod:`~mindforge.experience.entry`: :class:`ExperienceEntry` (instruction, commands with
  outputs, provenance ``oracle`` / ``model``, trial, task, contract, generation, validation);
- :mod:`~mindforge.experience.mining`: candidates from search-split reference solutions and
  passed search-split trials (:class:`SplitRefused` for anything else);
- :mod:`~mindforge.experience.validation`: too long / duplicate before replay, then
  ``failed`` / ``flaky`` from the replays (:class:`RejectionReason`);
- :mod:`~mindforge.experience.replay`: replaying an entry with no model (sandbox + verifier);
- :mod:`~mindforge.experience.snapshot`: the immutable, content-addressed snapshot;
- :mod:`~mindforge.experience.retrieval`: BM25 over instructions, deterministic, leave-one-out;
- :mod:`~mindforge.experience.contract`: the snapshot in the HCP contract and what a trial shows.
"""

from mindforge.experience.contract import (
    attach_snapshot,
    contract_snapshot,
    describe_experience,
    experience_changes,
    experience_summary,
    shown_entries,
)
from mindforge.experience.entry import (
    MAX_ENTRY_CHARS,
    MAX_ENTRY_STEPS,
    ORACLE_TRIAL,
    EntryValidation,
    ExperienceEntry,
    Provenance,
    make_entry,
    normalise_command,
)
from mindforge.experience.mining import (
    SEARCH_SPLIT,
    SplitRefused,
    check_search_split,
    mine_solution,
    mine_trial,
    solution_commands,
    trial_commands,
)
from mindforge.experience.retrieval import ProvenanceFilter, eligible, retrieve, tokenize
from mindforge.experience.snapshot import ExperienceSnapshot, load_snapshot
from mindforge.experience.validation import (
    DEFAULT_REPLAYS,
    Rejection,
    RejectionReason,
    ReplayPlan,
    judge_replays,
    plan_replays,
    replays_settled,
)

__all__ = [
    "DEFAULT_REPLAYS",
    "MAX_ENTRY_CHARS",
    "MAX_ENTRY_STEPS",
    "ORACLE_TRIAL",
    "SEARCH_SPLIT",
    "EntryValidation",
    "ExperienceEntry",
    "ExperienceSnapshot",
    "Provenance",
    "ProvenanceFilter",
    "Rejection",
    "RejectionReason",
    "ReplayPlan",
    "SplitRefused",
    "attach_snapshot",
    "check_search_split",
    "contract_snapshot",
    "describe_experience",
    "eligible",
    "experience_changes",
    "experience_summary",
    "judge_replays",
    "load_snapshot",
    "make_entry",
    "mine_solution",
    "mine_trial",
    "normalise_command",
    "plan_replays",
    "replays_settled",
    "retrieve",
    "shown_entries",
    "solution_commands",
    "tokenize",
    "trial_commands",
]
