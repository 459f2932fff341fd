"""The resumable state of a configuration search, and what one step plans and observes.

Everything here is small, JSON-serialisable pydantic data: the state is what a search
job commits after each step (``SearchJob.state``) and what a Temporal workflow may carry.
Cells and solved tasks are keyed by list indices (``"<task index>:<candidate index>"``)
rather than hashes to keep the state small; tasks and candidates are only ever appended.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from mindforge.hcp import WorkedExample
from mindforge.search.candidates import Candidate
from mindforge.search.edits import Edit
from mindforge.search.proposals import PromptRequest
from mindforge.search.race_models import Entrant, Prediction, Purpose, RaceProgress, SeedChain

StopReason = Literal["budget_attempts", "budget_tokens", "budget_time", "full_coverage", "no_candidates"]
Strategy = Literal["race", "adaptive", "random"]
#: each stop reason in words, for screens (the JSON and the store keep the short name)
STOP_REASON_TEXT: dict[str, str] = {
    "budget_attempts": "stopped at its trial budget",
    "budget_tokens": "stopped at its token budget",
    "budget_time": "stopped at its time budget",
    "full_coverage": "stopped with every failing task covered",
    "no_candidates": "stopped with no candidate left to try",
}


def stop_reason_text(reason: str | None) -> str:
    """A search's stop reason in words (``budget_attempts`` -> ``stopped at its trial budget``).

    A reason this version does not know (a newer worker's, or a refusal's note) is
    returned as it is.
    """
    if reason is None:
        return "no stop reason recorded"
    return STOP_REASON_TEXT.get(reason, reason)


class SearchBudget(BaseModel):
    """Limits of one search; at least one must be set.

    Attributes:
        max_attempts: trials (attempts) in all.
        max_tokens: prompt + completion tokens over all trials.
        max_wall_sec: wall-clock seconds spent running steps.
    """

    max_attempts: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_wall_sec: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_limit(self) -> SearchBudget:
        if self.max_attempts is None and self.max_tokens is None and self.max_wall_sec is None:
            raise ValueError("a search budget needs max_attempts, max_tokens or max_wall_sec")
        return self


class SearchConfig(BaseModel):
    """How the search allocates attempts.

    Attributes:
        seed: seed of every random draw (with the step index).
        strategy: ``race`` (the default: a shortlist seeded from data raced on shared
            tasks by successive halving, Thompson-sampling exploration of the rest of
            the edit space, edits that state predictions; see
            :mod:`mindforge.search.racing`), ``adaptive`` (the coverage allocator used
            before the race: audit-guided cell priors, evidence shared within clusters,
            composed and refined candidates, solved tasks leave the pool; see
            :mod:`mindforge.search.arms`; kept as a baseline and for states stored
            under it) or ``random`` (tasks and single operator edits drawn uniformly; a
            benchmark baseline).
        cells_per_step: cells (attempts) planned per step.
        max_attempts_per_cell: attempts of one task under one candidate (adaptive).
        max_candidates: candidates a search may create in all.
        compose_top: the best winners combined pairwise into new candidates.
        probe_attempts: attempts a candidate needs to be judged at all; the budget must
            allow two candidates' worth or the search is refused. Under ``race`` every
            shortlisted candidate gets this many race trials before any candidate is
            dropped, and the shortlist is cut to what the budget can probe.
        max_prompt_proposals: model-proposed prompt edits asked for in all.
        prompt_every_steps: steps between prompt proposal requests.
        prior_strength: pseudo-attempts of the audit-guided prior of a cell.
        cluster_weight / global_weight: weight of one attempt of the candidate on another
            task of the same cluster / of another cluster in a cell's posterior.
        edit_keys: restrict the operator edits to these keys (None = all).
        selection: ``ucb`` (posterior mean + ``exploration`` standard deviations) or
            ``thompson`` (a draw from the posterior) to score cells.
        exploration: weight of the posterior standard deviation under ``ucb``.
        use_audits: take priors from the tasks' audits (off: every edit is unrelated;
            an ablation).
        audit_fit_ranking: rank refinements, stepping stones and tied arms by how much
            of the audit their tags answer (the sum of levels) ahead of measured progress.
            Off by default: it was written to put the coupled ``command`` format first
            for one model; kept only so ``bench_search.py --mode rankings`` can measure
            what dropping it costs or gains.
        examples: worked examples the search may add (op ``add_example``): the
            lineage's ``--examples`` folder; none by default (nothing shipped may be
            written from bundled tasks, any of which can be a lineage's sealed task).
        experience_snapshot: the lineage's latest validated experience snapshot
            (canonical JSON), or None: the search may move the contract to it (op
            ``experience_snapshot``) and, with a snapshot in the contract, set retrieval
            ``k`` (op ``experience_k``).
        explore_share / max_explore_share: ``race``: the share of an open race's cells
            after the probes that explore the edit space off the shortlist, from the
            first up to the second as exploration's predictions are confirmed
            (:func:`mindforge.search.racing.explore_share`).
        max_entrants: ``race``: candidates racing at once (the shortlist's size at most).
        finalists: ``race``: halving stops at this many entrants (the successor race
            takes the top one or two).
        compositions: ``race``: candidates composed from pairs of winners, in all.
        other_every: ``race``: every this-many-th race trial of a targeted entrant runs
            on a task its prediction does not name (the other stratum of its rate).
        refute_alpha: ``race``: the level at which a prediction is refuted
            (:mod:`mindforge.search.predictions`).
        indifference: ``race``: pass-rate differences too small to race for; the race
            spends only while an entrant could still beat the leader by more
            (:func:`mindforge.search.racing.contenders`).
        library_variants: ``race``: edit keys whose addition to the lineage's library
            contract is shortlisted too (format, stop, mode and example-style variants).
        seeds: ``race``: edit chains earlier evidence names (the previous generation's
            entrant and runner-up), shortlisted first.
    """

    seed: int = 0
    strategy: Strategy = "race"
    cells_per_step: int = Field(default=16, ge=1)
    max_attempts_per_cell: int = Field(default=5, ge=1)
    max_candidates: int = Field(default=64, ge=2)
    compose_top: int = Field(default=4, ge=0)
    probe_attempts: int = Field(default=3, ge=1)
    max_prompt_proposals: int = Field(default=2, ge=0)
    prompt_every_steps: int = Field(default=5, ge=1)
    prior_strength: float = Field(default=4.0, gt=0)
    cluster_weight: float = Field(default=0.5, ge=0)
    global_weight: float = Field(default=0.1, ge=0)
    edit_keys: list[str] | None = None
    selection: Literal["thompson", "ucb"] = "ucb"
    exploration: float = Field(default=1.0, ge=0)
    use_audits: bool = True
    audit_fit_ranking: bool = False
    examples: list[WorkedExample] = Field(default_factory=list)
    experience_snapshot: str | None = None
    explore_share: float = Field(default=0.25, ge=0, le=1)
    max_explore_share: float = Field(default=0.75, ge=0, le=1)
    max_entrants: int = Field(default=8, ge=2)
    finalists: int = Field(default=2, ge=1)
    compositions: int = Field(default=3, ge=0)
    other_every: int = Field(default=4, ge=2)
    refute_alpha: float = Field(default=0.1, gt=0, lt=1)
    indifference: float = Field(default=0.1, gt=0, lt=1)
    library_variants: list[str] = Field(
        default_factory=lambda: [
            "action_format=command", "stop=newline", "mode=single_command", "example_style=compact"
        ]
    )
    seeds: list[SeedChain] = Field(default_factory=list)


class CostEstimate(BaseModel):
    """Average cost of one attempt, from the base evaluation (used before any search data)."""

    tokens_per_attempt: float = Field(default=0.0, ge=0)
    wall_sec_per_attempt: float = Field(default=0.0, ge=0)


class SearchTask(BaseModel):
    """A task that still failed after the base evaluation, with its audit.

    Attributes:
        task_hash / task_id: the task.
        cluster: ``owner:rule`` of its audit; tasks of a cluster share evidence.
        rule / owner / failure_class: the audit verdict.
        hints: exact clues from the evidence, as edit tags (``tool:read_file``).
        limits_fired: limits that fired in the audited trial.
        detail: one line of evidence.
    """

    task_hash: str
    task_id: str
    cluster: str
    rule: str
    owner: str
    failure_class: str = ""
    hints: list[str] = Field(default_factory=list)
    limits_fired: list[str] = Field(default_factory=list)
    detail: str = Field(default="", max_length=300)


class CellStats(BaseModel):
    """Attempts of one task under one candidate.

    Attributes:
        attempts: trials observed (all, including ones without a real reward).
        usable: trials with a real reward.
        successes: trials with the full reward.
        progress: failed usable trials whose audit no longer names the task's
            config-owned base failure (nor an unusable reply): the harness stopped
            standing in the way, the task failed further on (see :func:`is_progress`).
        progress_rules: audit rule -> progress trials that failed under it (what stands
            in the way now; refinements of a stepping stone fit it).
    """

    attempts: int = 0
    usable: int = 0
    successes: int = 0
    progress: int = 0
    progress_rules: dict[str, int] = Field(default_factory=dict)


class Spent(BaseModel):
    """What the search consumed: attempts, tokens (prompt + completion), wall seconds."""

    attempts: int = 0
    tokens: int = 0
    wall_sec: float = 0.0


class SearchState(BaseModel):
    """Everything needed to plan the next step; see :mod:`mindforge.search.allocator`.

    Attributes:
        job_id: the search job (part of every trial id).
        step: index of the next step to plan.
        root_toml: the search root contract, as TOML.
        root_hash: its content hash.
        budget / config / cost: limits, allocation settings, per-attempt cost estimate.
        tasks: the failing tasks, in a fixed order.
        candidates: candidates added so far (each once), in order.
        cells: ``"<task index>:<candidate index>"`` -> stats.
        solved: task index (as text) -> index of the first candidate that solved it.
        spent: consumption so far.
        curve: ``[attempts spent, tasks covered]`` after each step, from ``[0, 0]``.
        prompt_requests: prompt proposals asked for so far.
        rejected: counts of refused candidates and proposals, by reason.
        stop_reason: why the search stopped, once it has.
        common_order: ``race``: the task order every race trial follows (a permutation
            of the task indices drawn from the job id), so entrants are compared on
            the same tasks.
        entrants: ``race``: the shortlist, in the order candidates joined it.
        race: ``race``: the halving round, its quota and the trials per entrant.
        predictions: candidate index (as text) -> its prediction and verdict.
    """

    job_id: str
    step: int = 0
    root_toml: str
    root_hash: str
    budget: SearchBudget
    config: SearchConfig = Field(default_factory=SearchConfig)
    cost: CostEstimate = Field(default_factory=CostEstimate)
    tasks: list[SearchTask]
    candidates: list[Candidate] = Field(default_factory=list)
    cells: dict[str, CellStats] = Field(default_factory=dict)
    solved: dict[str, int] = Field(default_factory=dict)
    spent: Spent = Field(default_factory=Spent)
    curve: list[tuple[int, int]] = Field(default_factory=lambda: [(0, 0)])
    prompt_requests: int = 0
    rejected: dict[str, int] = Field(default_factory=dict)
    stop_reason: StopReason | None = None
    common_order: list[int] = Field(default_factory=list)
    entrants: list[Entrant] = Field(default_factory=list)
    race: RaceProgress = Field(default_factory=RaceProgress)
    predictions: dict[str, Prediction] = Field(default_factory=dict)

    @property
    def done(self) -> bool:
        """True once the search has stopped."""
        return self.stop_reason is not None

    def cell(self, task: int, candidate: int) -> CellStats:
        """The stats of a cell (zeros when never attempted)."""
        return self.cells.get(f"{task}:{candidate}", CellStats())

    @property
    def covered(self) -> int:
        """Failing tasks solved by at least one candidate (cumulative coverage)."""
        return len(self.solved)


class PlannedCell(BaseModel):
    """One attempt to run: a task under a candidate contract.

    Attributes:
        trial_id: deterministic (:func:`search_trial_id`), so a re-planned step finds
            the trials it already stored.
        task_hash / task_id: the task.
        contract_hash: the candidate contract.
        attempt: the cell's attempt index (0-based, over the whole search).
        purpose: ``race`` (a race trial on the common task order) or ``explore``.
    """

    trial_id: str
    task_hash: str
    task_id: str
    contract_hash: str
    attempt: int
    purpose: Purpose = "explore"


class StepPlan(BaseModel):
    """What one step runs.

    Attributes:
        step: the step index.
        cells: attempts to run (register ``new_candidates`` first).
        new_candidates: candidates first used by this step; register every contract of
            their chains (:func:`mindforge.search.candidates.materialize_chain`).
        prompt_requests: model-proposed prompt edits to ask for; return accepted edits
            in :attr:`StepResults.prompt_edits`.
        stop_reason: set when the search stops instead (``cells`` is then empty).
    """

    step: int
    cells: list[PlannedCell] = Field(default_factory=list)
    new_candidates: list[Candidate] = Field(default_factory=list)
    prompt_requests: list[PromptRequest] = Field(default_factory=list)
    stop_reason: StopReason | None = None


class CellResult(BaseModel):
    """The outcome of one planned cell (build it with ``cell_result_from_record``).

    Attributes:
        trial_id / task_hash / contract_hash / attempt: as planned.
        reward: the verifier reward, None when there is no real reward.
        usable: the reward is real (``mindforge.audit.usable_for_scoring``).
        tokens: prompt + completion tokens.
        wall_sec: the trial's wall time, seconds.
        rule: the audit rule of a failed trial (``model.wrong_answer``, ...); ``""``
            when it passed or was not audited.
    """

    trial_id: str
    task_hash: str
    contract_hash: str
    attempt: int
    reward: float | None = None
    usable: bool = True
    tokens: int = 0
    wall_sec: float = 0.0
    rule: str = ""

    @property
    def passed(self) -> bool:
        """A usable full reward."""
        return self.usable and self.reward is not None and self.reward >= 1.0


class StepResults(BaseModel):
    """What the caller observed for one step.

    Attributes:
        step: the step index (must be the state's).
        results: outcomes of the planned cells (cells left out are re-planned later).
        prompt_edits: accepted model-proposed prompt edits.
        prompt_rejections: reasons of rejected proposals.
        wall_sec: wall-clock seconds the step took; None = the sum of the trials'.
    """

    step: int
    results: list[CellResult] = Field(default_factory=list)
    prompt_edits: list[Edit] = Field(default_factory=list)
    prompt_rejections: list[str] = Field(default_factory=list)
    wall_sec: float | None = None


#: the audit rule of replies the harness could not use: a failure moving there is no progress
UNUSABLE_REPLY_RULE = "config.parse_failure"


def is_progress(task: SearchTask, result: CellResult) -> bool:
    """Whether a failed attempt got past the harness problem its task's audit named.

    True when the task's base failure is owned by the config (the harness stood in the
    way) and the attempt failed, with a real reward, under another audit rule that is
    not an unusable reply: e.g. replies that did not parse under the baseline
    (``config.parse_failure``) parse under the candidate and the task now fails as
    ``model.wrong_answer``. Such a candidate is a stepping stone: the allocator refines
    it with one more fitting edit even before anything passed
    (:func:`mindforge.search.arms.offer_new_arms`).
    """
    return (
        task.owner == "config"
        and result.usable
        and not result.passed
        and result.rule not in ("", task.rule, UNUSABLE_REPLY_RULE)
    )


def search_trial_id(job_id: str, task_hash: str, contract_hash: str, attempt: int) -> str:
    """The deterministic trial id of one attempt of a search cell.

    The step is deliberately not part of the id: a cell's attempt index counts over the
    whole search, so (job, task, contract, attempt) is unique, and an attempt planned
    but not observed before a crash keeps its id when it is planned again in a later
    step, finding the stored trial instead of running it twice.

    Returns:
        ``"s-"`` and 40 hex characters of a sha256 over the parts.
    """
    digest = hashlib.sha256(f"{job_id}|{task_hash}|{contract_hash}|{attempt}".encode()).hexdigest()
    return f"s-{digest[:40]}"
