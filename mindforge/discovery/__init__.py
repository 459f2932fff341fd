"""Discovery: the current pair proposes new tasks; only validated ones join the pool.

Steps (docs/design.md, "One generation: three stages"):

1. :func:`~mindforge.discovery.proposal.request_proposals` - the contract's discovery
   prompt plus a pool summary asks for K tasks in a strict JSON format; malformed
   proposals are rejected with the reason.
2. :func:`~mindforge.discovery.materialise.materialise` writes each proposal as a native
   task directory in a staging area; :func:`~mindforge.discovery.admission.check_proposal`
   runs the static checks (duplicates, tests reading the solution, the answer in the
   instruction), task validation and the difficulty estimate.
3. :func:`~mindforge.discovery.run.admission_record` gives admitted tasks a split
   (:func:`mindforge.evaluation.assign_splits`, as the starting pool got them) and
   :func:`mindforge.store.discovered.admit_to_store` registers them with provenance (the store layer).

:func:`~mindforge.discovery.run.run_discovery` runs all three in-process; a workflow
runs :func:`~mindforge.discovery.run.propose_batch`, ``check_proposal`` per staged
proposal (in parallel) and :func:`~mindforge.discovery.run.admission_record` as
separate activities, then the admission activity registers the admitted ones.
"""

from mindforge.discovery.admission import (
    check_proposal,
    discovered_dir,
    estimate_difficulty,
    make_provenance,
    unique_task_id,
)
from mindforge.discovery.checks import SIMILARITY_THRESHOLD, PoolIndex, static_checks
from mindforge.discovery.materialise import (
    DiscoveredTaskLimits,
    materialise,
    move_task_dir,
)
from mindforge.discovery.proposal import (
    DiscoveryEndpointError,
    PoolSummary,
    ProposalOutcome,
    TaskHead,
    parse_proposals,
    render_proposal_prompt,
    request_proposals,
    summarise_pool,
)
from mindforge.discovery.records import (
    AdmittedTask,
    DifficultyEstimate,
    DiscoveryRecord,
    PairInfo,
    ProposalBatch,
    ProposalVerdict,
    Rejection,
    RejectReason,
    StagedProposal,
)
from mindforge.discovery.run import (
    DiscoveryConfig,
    admission_record,
    propose_batch,
    run_discovery,
)
from mindforge.discovery.schema import DEFAULT_RULES, ProposalRules, TaskProposal

__all__ = [
    "DEFAULT_RULES",
    "SIMILARITY_THRESHOLD",
    "AdmittedTask",
    "DifficultyEstimate",
    "DiscoveredTaskLimits",
    "DiscoveryConfig",
    "DiscoveryEndpointError",
    "DiscoveryRecord",
    "PairInfo",
    "PoolIndex",
    "PoolSummary",
    "ProposalBatch",
    "ProposalOutcome",
    "ProposalRules",
    "ProposalVerdict",
    "RejectReason",
    "Rejection",
    "StagedProposal",
    "TaskHead",
    "TaskProposal",
    "admission_record",
    "check_proposal",
    "discovered_dir",
    "estimate_difficulty",
    "make_provenance",
    "materialise",
    "move_task_dir",
    "parse_proposals",
    "propose_batch",
    "render_proposal_prompt",
    "request_proposals",
    "run_discovery",
    "static_checks",
    "summarise_pool",
    "unique_task_id",
]
