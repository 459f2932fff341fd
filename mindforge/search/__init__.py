"""Configuration search: candidate HCP contracts and the adaptive allocation of attempts.

- :mod:`~mindforge.search.edits`: recorded operator edits (the search space);
- :mod:`~mindforge.search.library`: the skills (``skills/*.sh``) shipped as data for the
  edits to add, and the loader of a user's worked-example folder (``--examples DIR``);
- :mod:`~mindforge.search.candidates`: candidates as edit chains from the search root,
  materialised with :func:`mindforge.hcp.derive`, deduplicated by harness;
- :mod:`~mindforge.search.proposals`: model-proposed prompt edits;
- :mod:`~mindforge.search.state` and :mod:`~mindforge.search.allocator`: the resumable
  search (``init_search`` / ``plan_step`` / ``observe``);
- :mod:`~mindforge.search.objective`: the objective, a candidate's posterior pass rate on
  the search split, its ranking and the per-task Pareto front;
- :mod:`~mindforge.search.shortlist`, :mod:`~mindforge.search.racing` and
  :mod:`~mindforge.search.race_rounds`: the race (the default strategy) - a shortlist
  from data raced on shared tasks, exploration, halving, who joins;
- :mod:`~mindforge.search.predictions`: what each edit states it will change and the
  verdict of its trials (small records in :mod:`~mindforge.search.race_models`);
- :mod:`~mindforge.search.tasks`: failing tasks from audits, cell results from trials;
- :mod:`~mindforge.search.coverage`: the coverage ledger (cumulative and single-contract);
- :mod:`~mindforge.search.arms`: cells among existing and potential candidates (the
  coverage allocator, ``strategy="adaptive"``, and the race's exploration).

A simulated unlock problem for measuring the allocator offline lives outside the product,
in ``benchmarks/simulate.py``.
"""

from mindforge.search.allocator import (
    BudgetTooSmallError,
    NoCandidatesError,
    SearchRefused,
    StaleStepError,
    init_search,
    observe,
    plan_step,
    root_contract,
    run_search,
)
from mindforge.search.candidates import (
    Candidate,
    CandidateError,
    CandidatePool,
    candidate_diff,
    compose_edits,
    harness_hash,
    make_candidate,
    materialize,
    materialize_chain,
)
from mindforge.search.edits import Edit, edit_changes, edit_example, example_edit, operator_edits
from mindforge.search.library import load_example_folder, skill_library
from mindforge.search.proposals import (
    PromptProposal,
    PromptRequest,
    propose_prompt_edit,
)
from mindforge.search.state import (
    CellResult,
    CostEstimate,
    PlannedCell,
    SearchBudget,
    SearchConfig,
    SearchState,
    SearchTask,
    StepPlan,
    StepResults,
    search_trial_id,
)
from mindforge.search.tasks import cell_result_from_record, search_tasks_from_audits

__all__ = [
    "BudgetTooSmallError",
    "Candidate",
    "CandidateError",
    "CandidatePool",
    "CellResult",
    "CostEstimate",
    "Edit",
    "NoCandidatesError",
    "PlannedCell",
    "PromptProposal",
    "PromptRequest",
    "SearchBudget",
    "SearchConfig",
    "SearchRefused",
    "SearchState",
    "SearchTask",
    "StaleStepError",
    "StepPlan",
    "StepResults",
    "candidate_diff",
    "cell_result_from_record",
    "compose_edits",
    "edit_changes",
    "edit_example",
    "example_edit",
    "harness_hash",
    "load_example_folder",
    "init_search",
    "make_candidate",
    "materialize",
    "materialize_chain",
    "observe",
    "operator_edits",
    "plan_step",
    "propose_prompt_edit",
    "root_contract",
    "run_search",
    "search_tasks_from_audits",
    "search_trial_id",
    "skill_library",
]
