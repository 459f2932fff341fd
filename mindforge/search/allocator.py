"""Adaptive allocation of attempts over (failing task x candidate contract) cells.

The search loop, pure and resumable::

    state = init_search(job_id=..., root=contract, tasks=failing, budget=SearchBudget(max_attempts=450))
    while not state.done:
        plan = plan_step(state)           # deterministic given the state
        results = run(plan)               # register plan.new_candidates, run plan.cells
        state = observe(state, results)   # commit state (and the new candidates) together

``plan_step`` draws from an RNG seeded by (``config.seed``, ``state.step``), so the same
state always plans the same step: after a crash between plan and observe, re-planning
from the last committed state yields the same cells with the same trial ids (found in
the store rather than run again) and the same new candidates (added once, by hash).

Which cells a step runs is decided in :mod:`.arms` (``pick_adaptive``): by default a Bayesian upper
confidence bound over (task x candidate) cells, with priors from the tasks' audits and
evidence shared within clusters of tasks whose audits agree (so promising cells are
re-attempted, a candidate that solves a cluster spreads to its other tasks, and
unrelated edits wait until the likely ones fail). New candidates come from the edit
space (one operator edit), from the best winners composed pairwise, from a cluster's
best winner refined by one more edit that fits it, and from model-proposed prompt edits
(asked for through ``StepPlan.prompt_requests``).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import defaultdict
from collections.abc import Callable
from functools import lru_cache

from mindforge.errors import MindForgeError
from mindforge.hcp import HCPContract, dump_contract, loads_contract
from mindforge.search.arms import Arms, offer_new_arms, pick_adaptive, pick_random
from mindforge.search.candidates import Candidate, CandidateError, CandidatePool, make_candidate
from mindforge.search.edits import Edit, operator_edits
from mindforge.search.proposals import AuditSummary, PromptRequest
from mindforge.search.race_models import Purpose, RaceProgress
from mindforge.search.race_rounds import advance_race, model_entrant
from mindforge.search.racing import plan_race_cells
from mindforge.search.shortlist import build_shortlist
from mindforge.search.state import (
    CellStats,
    CostEstimate,
    PlannedCell,
    SearchBudget,
    SearchConfig,
    SearchState,
    SearchTask,
    StepPlan,
    StepResults,
    StopReason,
    is_progress,
    search_trial_id,
)


class SearchRefused(MindForgeError):
    """The search cannot start; ``reason`` says why (checked before any trial runs)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"search refused: {reason}")


class BudgetTooSmallError(SearchRefused):
    """The budget allows fewer than two candidates to be tried."""


class NoCandidatesError(SearchRefused):
    """The edit space offers fewer than two candidates."""


class StaleStepError(MindForgeError):
    """Results were given for a step other than the state's next one (already observed?)."""


@lru_cache(maxsize=32)
def _root(toml_text: str) -> HCPContract:
    return loads_contract(toml_text, "<search root>")


def root_contract(state: SearchState) -> HCPContract:
    """The search root contract of a state."""
    return _root(state.root_toml)


def _single_edits(root: HCPContract, config: SearchConfig) -> list[Edit]:
    edits = operator_edits(root, config.examples, config.experience_snapshot)
    if config.edit_keys is not None:
        wanted = set(config.edit_keys)
        edits = [e for e in edits if e.key in wanted]
    return edits


def init_search(
    *,
    job_id: str,
    root: HCPContract,
    tasks: list[SearchTask],
    budget: SearchBudget,
    config: SearchConfig | None = None,
    cost: CostEstimate | None = None,
) -> SearchState:
    """Start a search, or refuse before anything runs.

    Args:
        job_id: the search job's id (part of every trial id).
        root: the contract the search derives candidates from (the generation's).
        tasks: the tasks still failing after the base evaluation, with their audits
            (:func:`mindforge.search.tasks.search_tasks_from_audits`).
        budget: attempts, tokens and/or wall seconds.
        config: allocation settings.
        cost: per-attempt cost from the base evaluation (tokens, seconds), used to check
            token and time budgets before search data exists.

    Returns:
        the initial state (already stopped with ``full_coverage`` when no task fails).

    Raises:
        NoCandidatesError: the edit space yields fewer than two distinct candidates.
        BudgetTooSmallError: the budget allows fewer than two candidates to be tried,
            each needing ``config.probe_attempts`` attempts (or fewer when fewer tasks
            fail) at the estimated cost.
    """
    config = config or SearchConfig()
    cost = cost or CostEstimate()
    pool = CandidatePool(root)
    for edit in _single_edits(root, config):
        try:
            pool.add(make_candidate(root, [edit], origin="operator", step=0))
        except CandidateError:
            continue
        if len(pool.items) >= 2:
            break
    if len(pool.items) < 2:
        raise NoCandidatesError(
            f"the edit space of {root.ref} yields {len(pool.items)} candidate(s); a search needs two"
        )
    per_candidate = max(1, min(config.probe_attempts, len(tasks)))
    needed = 2 * per_candidate
    if budget.max_attempts is not None and budget.max_attempts < needed:
        raise BudgetTooSmallError(
            f"a budget of {budget.max_attempts} attempts allows fewer than two candidates "
            f"({per_candidate} attempts each, {needed} in all)"
        )
    if budget.max_tokens is not None and budget.max_tokens < needed * cost.tokens_per_attempt:
        raise BudgetTooSmallError(
            f"a budget of {budget.max_tokens} tokens allows fewer than two candidates "
            f"({needed} attempts at about {cost.tokens_per_attempt:.0f} tokens each)"
        )
    if budget.max_wall_sec is not None and budget.max_wall_sec < needed * cost.wall_sec_per_attempt:
        raise BudgetTooSmallError(
            f"a budget of {budget.max_wall_sec:.0f} s allows fewer than two candidates "
            f"({needed} attempts at about {cost.wall_sec_per_attempt:.0f} s each)"
        )
    state = SearchState(
        job_id=job_id,
        root_toml=dump_contract(root),
        root_hash=root.content_hash,
        budget=budget,
        config=config,
        cost=cost,
        tasks=list(tasks),
    )
    if not tasks:
        state.stop_reason = "full_coverage"
    elif config.strategy == "race":
        state.common_order = _common_order(job_id, config.seed, len(tasks))
        state.entrants = build_shortlist(root, tasks, config, _shortlist_capacity(budget, config, cost))
        state.race = RaceProgress(quota=config.probe_attempts)
    return state


def _common_order(job_id: str, seed: int, n_tasks: int) -> list[int]:
    """The race's task order: a permutation of ``range(n_tasks)`` drawn from (seed, job id)."""
    digest = hashlib.sha256(f"{seed}:{job_id}:order".encode()).digest()
    order = list(range(n_tasks))
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return order


def _shortlist_capacity(budget: SearchBudget, config: SearchConfig, cost: CostEstimate) -> int:
    """The most entrants the budget can race: probes plus about two halving rounds each.

    Probing ``k`` entrants costs ``k * probe_attempts`` race trials and each halving
    round about half that again, so ``k <= race budget / (2 * probe_attempts)``, where
    the race budget is the attempts left after exploration's share (estimated from the
    per-attempt cost for token and time budgets); at least 2, at most ``max_entrants``.
    """
    attempts = [budget.max_attempts] if budget.max_attempts is not None else []
    if budget.max_tokens is not None and cost.tokens_per_attempt > 0:
        attempts.append(int(budget.max_tokens / cost.tokens_per_attempt))
    if budget.max_wall_sec is not None and cost.wall_sec_per_attempt > 0:
        attempts.append(int(budget.max_wall_sec / cost.wall_sec_per_attempt))
    if not attempts:
        return config.max_entrants
    race_budget = min(attempts) * (1 - config.explore_share)
    return max(2, min(config.max_entrants, int(race_budget // (2 * config.probe_attempts))))


def _stop_reason(state: SearchState) -> StopReason | None:
    # under race, solved tasks stay in the pool: full coverage is no reason to stop
    if state.covered >= len(state.tasks) and (state.config.strategy != "race" or not state.tasks):
        return "full_coverage"
    budget, spent = state.budget, state.spent
    if budget.max_attempts is not None and spent.attempts >= budget.max_attempts:
        return "budget_attempts"
    if budget.max_tokens is not None and spent.tokens >= budget.max_tokens:
        return "budget_tokens"
    if budget.max_wall_sec is not None and spent.wall_sec >= budget.max_wall_sec:
        return "budget_time"
    return None


def _cells_this_step(state: SearchState) -> int:
    budget, spent, cost = state.budget, state.spent, state.cost
    n = state.config.cells_per_step
    if budget.max_attempts is not None:
        n = min(n, budget.max_attempts - spent.attempts)
    tokens_each = spent.tokens / spent.attempts if spent.attempts else cost.tokens_per_attempt
    if budget.max_tokens is not None and tokens_each > 0:
        n = min(n, math.ceil((budget.max_tokens - spent.tokens) / tokens_each))
    wall_each = spent.wall_sec / spent.attempts if spent.attempts else cost.wall_sec_per_attempt
    if budget.max_wall_sec is not None and wall_each > 0:
        n = min(n, math.ceil((budget.max_wall_sec - spent.wall_sec) / wall_each))
    return max(n, 1)


def _rng(state: SearchState) -> random.Random:
    seed = hashlib.sha256(f"{state.config.seed}:{state.job_id}:{state.step}".encode()).digest()
    return random.Random(int.from_bytes(seed[:8], "big"))


def plan_step(state: SearchState) -> StepPlan:
    """Plan the next step; a pure function of ``state`` (see the module docstring).

    Returns:
        the cells to run and the candidates they first use, or a plan with
        ``stop_reason`` set (and no cells) when the search is over: full coverage, a
        spent budget, or no candidate left to try (``no_candidates``).
    """
    if state.stop_reason is not None:
        return StepPlan(step=state.step, stop_reason=state.stop_reason)
    reason = _stop_reason(state)
    if reason is not None:
        return StepPlan(step=state.step, stop_reason=reason)
    root = root_contract(state)
    unsolved = [t for t in range(len(state.tasks)) if str(t) not in state.solved]
    arms = Arms(state, root)
    singles = _single_edits(root, state.config)
    rng = _rng(state)
    n_cells = _cells_this_step(state)
    picks: list[tuple[int, Candidate, Purpose]]
    offer_new_arms(arms, state, singles, unsolved)
    if state.config.strategy == "race":
        picks = plan_race_cells(state, arms, unsolved, n_cells, rng)
    else:
        chosen = (
            pick_random(state, arms, singles, unsolved, n_cells, rng)
            if state.config.strategy == "random"
            else pick_adaptive(state, arms, unsolved, n_cells, rng)
        )
        picks = [(task, cand, "explore") for task, cand in chosen]
    if not picks:
        return StepPlan(step=state.step, stop_reason="no_candidates")
    cells: list[PlannedCell] = []
    planned: defaultdict[tuple[int, int], int] = defaultdict(int)
    for task, cand, purpose in picks:
        index = arms.index_of(cand)
        cand = arms.pool.items[index]  # the known candidate when the pick duplicated its harness
        attempt = state.cell(task, index).attempts + planned[(task, index)]
        planned[(task, index)] += 1
        entry = state.tasks[task]
        trial_id = search_trial_id(state.job_id, entry.task_hash, cand.contract_hash, attempt)
        cells.append(
            PlannedCell(
                trial_id=trial_id,
                task_hash=entry.task_hash,
                task_id=entry.task_id,
                contract_hash=cand.contract_hash,
                attempt=attempt,
                purpose=purpose,
            )
        )
    return StepPlan(
        step=state.step, cells=cells, new_candidates=arms.new, prompt_requests=_prompt_requests(state, unsolved)
    )


def _prompt_requests(state: SearchState, unsolved: list[int]) -> list[PromptRequest]:
    config = state.config
    if (
        config.strategy == "random"
        or state.prompt_requests >= config.max_prompt_proposals
        or state.step % config.prompt_every_steps != 0
        or not unsolved
    ):
        return []
    by_cluster: dict[str, list[int]] = defaultdict(list)
    for t in unsolved:
        by_cluster[state.tasks[t].cluster].append(t)
    cluster = max(sorted(by_cluster), key=lambda c: len(by_cluster[c]))
    audits = [
        AuditSummary(
            task_id=state.tasks[t].task_id,
            failure_class=state.tasks[t].failure_class,
            owner=state.tasks[t].owner,
            rule=state.tasks[t].rule,
            detail=state.tasks[t].detail[:300],
        )
        for t in by_cluster[cluster][:20]
    ]
    return [PromptRequest(cluster=cluster, audits=audits)]


def observe(state: SearchState, results: StepResults) -> SearchState:
    """Fold one step's results into a new state (the input state is not changed).

    Re-plans the step (deterministic) to know its cells and new candidates, adds the
    candidates once (by hash), counts each planned trial once (by trial id; results for
    cells that were not planned are an error), adds accepted prompt edits as candidates,
    and stops the search when coverage is full or a budget is spent.

    Raises:
        StaleStepError: ``results.step`` is not the state's next step.
        ValueError: a result for a cell the step did not plan (or for a step that stops).
    """
    if results.step != state.step:
        raise StaleStepError(f"results are for step {results.step}, the state expects step {state.step}")
    plan = plan_step(state)
    new = state.model_copy(deep=True)
    if plan.stop_reason is not None:
        if results.results:
            raise ValueError(f"step {state.step} stops the search ({plan.stop_reason}); it planned no cells")
        new.stop_reason = plan.stop_reason
        return new
    root = root_contract(state)
    pool = CandidatePool(root, new.candidates)
    for cand in plan.new_candidates:
        pool.add(cand)
    planned = {cell.trial_id: cell for cell in plan.cells}
    seen: set[str] = set()
    for result in results.results:
        cell = planned.get(result.trial_id)
        if cell is None or (cell.task_hash, cell.contract_hash, cell.attempt) != (
            result.task_hash,
            result.contract_hash,
            result.attempt,
        ):
            raise ValueError(f"result {result.trial_id} is not a cell planned in step {state.step}")
        if result.trial_id in seen:
            continue
        seen.add(result.trial_id)
        task = next(i for i, t in enumerate(new.tasks) if t.task_hash == result.task_hash)
        index = pool.find(result.contract_hash)
        if index is None:
            raise ValueError(f"result {result.trial_id} names contract {result.contract_hash}, not a known candidate")
        stats = new.cells.setdefault(f"{task}:{index}", CellStats())
        stats.attempts += 1
        stats.usable += int(result.usable)
        stats.successes += int(result.passed)
        if is_progress(new.tasks[task], result):
            stats.progress += 1
            stats.progress_rules[result.rule] = stats.progress_rules.get(result.rule, 0) + 1
        new.spent.attempts += 1
        new.spent.tokens += result.tokens
        if result.passed and str(task) not in new.solved:
            new.solved[str(task)] = index
    new.candidates = list(pool.items)
    if new.config.strategy == "race":
        advance_race(new, plan, results, seen, root)
    _add_prompt_edits(new, pool, root, results, plan.prompt_requests)
    new.candidates = list(pool.items)
    new.prompt_requests += len(plan.prompt_requests)
    seen_results = [r for r in results.results if r.trial_id in seen]
    new.spent.wall_sec += results.wall_sec if results.wall_sec is not None else sum(r.wall_sec for r in seen_results)
    new.curve.append((new.spent.attempts, new.covered))
    new.step += 1
    new.stop_reason = _stop_reason(new)
    return new


def _add_prompt_edits(
    new: SearchState, pool: CandidatePool, root: HCPContract, results: StepResults, requests: list[PromptRequest]
) -> None:
    """Add accepted prompt edits as candidates; under ``race`` each joins the race, naming its cluster's tasks."""
    cluster = requests[0].cluster if requests else ""
    for edit in results.prompt_edits:
        try:
            candidate = make_candidate(root, [edit], origin="model", step=new.step)
        except CandidateError:
            new.rejected["invalid_prompt_edit"] = new.rejected.get("invalid_prompt_edit", 0) + 1
            continue
        if len(pool.items) >= new.config.max_candidates or not pool.add(candidate):
            new.rejected["duplicate_or_full"] = new.rejected.get("duplicate_or_full", 0) + 1
            continue
        if new.config.strategy == "race":
            entrant, prediction = model_entrant(new, root, candidate, cluster)
            new.entrants.append(entrant)
            new.predictions[str(len(pool.items) - 1)] = prediction
    if results.prompt_rejections:
        new.rejected["prompt_rejected"] = new.rejected.get("prompt_rejected", 0) + len(results.prompt_rejections)


def run_search(
    state: SearchState, execute: Callable[[StepPlan], StepResults], *, max_steps: int | None = None
) -> SearchState:
    """Run plan/execute/observe until the search stops (or ``max_steps`` steps ran).

    Args:
        state: where to start (fresh or resumed).
        execute: runs a plan's cells and returns their results (for a plan with a stop
            reason it may return empty results).
        max_steps: stop after this many steps even when the search is not done.

    Returns:
        the final state.
    """
    steps = 0
    while not state.done and (max_steps is None or steps < max_steps):
        plan = plan_step(state)
        results = execute(plan) if plan.stop_reason is None else StepResults(step=plan.step)
        state = observe(state, results)
        steps += 1
    return state
