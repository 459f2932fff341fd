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

Adaptive strategy (Thompson sampling over cells): each cell's success rate has a Beta
posterior whose prior mean comes from the audit of the task (:mod:`.affinity`), and
whose evidence is the cell's own attempts plus, down-weighted, the candidate's results on
the other tasks of the same cluster (tasks whose audits share a rule) and of other
clusters. Each step samples every eligible cell of every unsolved task and runs the
best draws - so promising cells are re-attempted, candidates that solve a cluster spread
to its other tasks, and unrelated edits are tried once the likely ones fail. New
candidates come from the edit space (one operator edit), from the best winners composed
pairwise, from a cluster's best winner refined by one more edit that fits the cluster,
and from model-proposed prompt edits. The ``random`` strategy (a benchmark baseline)
picks tasks and single operator edits uniformly.
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
from mindforge.search.affinity import PRIOR_MEAN, affinity, task_affinity_table
from mindforge.search.candidates import Candidate, CandidateError, CandidatePool, compose_edits, make_candidate
from mindforge.search.edits import Edit, operator_edits
from mindforge.search.proposals import AuditSummary, PromptRequest
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
    search_trial_id,
)

#: refined candidates (winner + one edit) considered per cluster and step
REFINE_PER_CLUSTER = 8


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
    edits = operator_edits(root)
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
    return state


def _stop_reason(state: SearchState) -> StopReason | None:
    if state.covered >= len(state.tasks):
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


class _Arms:
    """Existing candidates plus potential new ones, for one planning step."""

    def __init__(self, state: SearchState, root: HCPContract) -> None:
        self.state, self.root = state, root
        self.pool = CandidatePool(root, state.candidates)
        self.new: list[Candidate] = []
        self.potential: list[Candidate] = []
        self.capacity = state.config.max_candidates - len(state.candidates)

    def offer(self, edits: list[Edit], origin: str) -> None:
        if len(self.potential) >= self.capacity:
            return
        try:
            candidate = make_candidate(self.root, edits, origin=origin, step=self.state.step)  # type: ignore[arg-type]
        except CandidateError:
            return
        if self.pool.duplicate_of(candidate) is None and all(
            c.harness_hash != candidate.harness_hash for c in self.potential
        ):
            self.potential.append(candidate)

    def all(self) -> list[Candidate]:
        return [*self.pool.items, *self.potential]

    def index_of(self, candidate: Candidate) -> int:
        """The candidate's index in the state once added (a potential one is added now)."""
        found = self.pool.find(candidate.contract_hash)
        if found is not None:
            return found
        self.pool.add(candidate)
        self.new.append(candidate)
        return len(self.pool.items) - 1


def _evidence(state: SearchState) -> dict[int, dict[str, list[int]]]:
    """candidate index -> cluster -> [usable attempts, successes] over all tasks."""
    out: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for key, stats in state.cells.items():
        task, cand = (int(part) for part in key.split(":"))
        entry = out[cand][state.tasks[task].cluster]
        entry[0] += stats.usable
        entry[1] += stats.successes
    return out


def _offer_new(arms: _Arms, state: SearchState, singles: list[Edit], unsolved: list[int]) -> None:
    for edit in singles:
        arms.offer([edit], "operator")
    if state.config.strategy != "adaptive":
        return
    wins: dict[int, int] = defaultdict(int)
    for key, stats in state.cells.items():
        wins[int(key.split(":")[1])] += stats.successes
    winners = sorted((i for i in wins if wins[i] > 0), key=lambda i: (-wins[i], i))[: state.config.compose_top]
    for a_pos, a in enumerate(winners):
        for b in winners[a_pos + 1 :]:
            try:
                arms.offer(compose_edits(state.candidates[a].edits, state.candidates[b].edits), "compose")
            except CandidateError:
                continue
    evidence = _evidence(state)
    clusters = sorted({state.tasks[t].cluster for t in unsolved})
    for cluster in clusters:
        # the candidate with the most wins in this cluster (any candidate, not only the top winners)
        best = max(sorted(wins), key=lambda i: (evidence[i][cluster][1], -i), default=None)
        if best is None or evidence[best][cluster][1] == 0:
            continue
        table = task_affinity_table(next(state.tasks[t] for t in unsolved if state.tasks[t].cluster == cluster))
        slots = {e.slot for e in state.candidates[best].edits}
        fitting = [e for e in singles if e.slot not in slots and affinity(table, e.tags(arms.root)) >= 1]
        for edit in fitting[:REFINE_PER_CLUSTER]:
            try:
                arms.offer(compose_edits(state.candidates[best].edits, [edit]), "refine")
            except CandidateError:
                continue


class _Context:
    """Per-step precomputation shared by all cells: evidence, affinity tables, arm tags."""

    def __init__(self, state: SearchState, root: HCPContract, unsolved: list[int]) -> None:
        self.state, self.root = state, root
        self.evidence = _evidence(state)
        use = state.config.use_audits
        self.tables = {t: task_affinity_table(state.tasks[t]) if use else {} for t in unsolved}
        self._arm: dict[str, tuple[frozenset[str], list[int]]] = {}

    def arm(self, cand: Candidate) -> tuple[frozenset[str], list[int]]:
        """The arm's edit tags and the indices of candidates whose edits are a proper subset of its."""
        if cand.contract_hash not in self._arm:
            tags = frozenset().union(*(e.tags(self.root) for e in cand.edits))
            keys = set(cand.edit_keys)
            subs = [i for i, other in enumerate(self.state.candidates) if set(other.edit_keys) < keys]
            self._arm[cand.contract_hash] = (tags, subs)
        return self._arm[cand.contract_hash]


def _posterior(ctx: _Context, task: int, cand: Candidate, index: int | None) -> tuple[float, float]:
    """Beta(alpha, beta) of one cell.

    Prior: ``prior_strength`` pseudo-attempts at the audit affinity's prior rate. Evidence:
    the cell's own attempts (weight 1), the candidate's attempts on other tasks of the same
    cluster (``cluster_weight``) and of other clusters (``global_weight``), and, at half
    those weights, the successes of candidates whose edits are a subset of its edits (a
    composed candidate inherits its parts' wins).
    """
    state, config = ctx.state, ctx.state.config
    cluster = state.tasks[task].cluster
    tags, subs = ctx.arm(cand)
    m0 = PRIOR_MEAN[affinity(ctx.tables[task], tags)]
    alpha, beta = config.prior_strength * m0, config.prior_strength * (1 - m0)
    if index is not None:
        own = state.cell(task, index)
        alpha += own.successes
        beta += own.usable - own.successes
        for where, (usable, wins) in ctx.evidence.get(index, {}).items():
            if where == cluster:
                usable, wins = usable - own.usable, wins - own.successes
            weight = config.cluster_weight if where == cluster else config.global_weight
            alpha += weight * wins
            beta += weight * (usable - wins)
    for sub in subs:
        if sub == index:
            continue
        for where, (_usable, wins) in ctx.evidence.get(sub, {}).items():
            weight = config.cluster_weight if where == cluster else config.global_weight
            alpha += 0.5 * weight * wins
    return alpha, max(beta, 1e-6)


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
    arms = _Arms(state, root)
    singles = _single_edits(root, state.config)
    _offer_new(arms, state, singles, unsolved)
    rng = _rng(state)
    n_cells = _cells_this_step(state)
    if state.config.strategy == "random":
        picks = _pick_random(state, arms, singles, unsolved, n_cells, rng)
    else:
        picks = _pick_thompson(state, arms, unsolved, n_cells, rng)
    if not picks:
        return StepPlan(step=state.step, stop_reason="no_candidates")
    cells, planned = [], defaultdict(int)
    for task, cand in picks:
        index = arms.index_of(cand)
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
            )
        )
    return StepPlan(
        step=state.step, cells=cells, new_candidates=arms.new, prompt_requests=_prompt_requests(state, unsolved)
    )


def _pick_thompson(
    state: SearchState, arms: _Arms, unsolved: list[int], n_cells: int, rng: random.Random
) -> list[tuple[int, Candidate]]:
    ctx = _Context(state, arms.root, unsolved)
    cap = state.config.max_attempts_per_cell
    draws: list[tuple[float, int, int, Candidate]] = []
    existing = len(arms.pool.items)
    all_arms = arms.all()
    for t in unsolved:
        composing = _singles_tried(ctx, t, all_arms, existing)
        for position, cand in enumerate(all_arms):
            index = position if position < existing else None
            if index is not None and state.cell(t, index).attempts >= cap:
                continue
            if len(cand.edits) > 1 and not composing:
                continue
            alpha, beta = _posterior(ctx, t, cand, index)
            draws.append((_score(state.config, alpha, beta, rng), t, position, cand))
    draws.sort(key=lambda d: (-d[0], d[1], d[2]))
    per_task = max(1, math.ceil(n_cells / max(len(unsolved), 1)))
    taken: dict[int, int] = defaultdict(int)
    picks: list[tuple[int, Candidate]] = []
    for _theta, t, _pos, cand in draws:
        if len(picks) >= n_cells:
            break
        if taken[t] < per_task:
            taken[t] += 1
            picks.append((t, cand))
    return picks


def _score(config: SearchConfig, alpha: float, beta: float, rng: random.Random) -> float:
    if config.selection == "thompson":
        return rng.betavariate(alpha, beta)
    mean = alpha / (alpha + beta)
    std = math.sqrt(alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1)))
    return mean + config.exploration * std + 1e-9 * rng.random()


def _singles_tried(ctx: _Context, task: int, all_arms: list[Candidate], existing: int) -> bool:
    """Whether every single edit that fits the task has been attempted on it.

    The fitting edits are the single-edit arms the task's audit relates to (affinity 1
    or more), or all single edits when it relates to none. Composed and refined
    candidates are only tried on a task after that: they are for tasks that one fitting
    edit did not solve.
    """
    table = ctx.tables[task]
    singles = [(p, c) for p, c in enumerate(all_arms) if len(c.edits) == 1]
    levels = {p: affinity(table, ctx.arm(c)[0]) for p, c in singles}
    floor = 1 if max(levels.values(), default=0) >= 1 else 0
    for position, _cand in singles:
        if levels[position] < floor:
            continue
        if position >= existing or ctx.state.cell(task, position).attempts == 0:
            return False
    return True


def _pick_random(
    state: SearchState, arms: _Arms, singles: list[Edit], unsolved: list[int], n_cells: int, rng: random.Random
) -> list[tuple[int, Candidate]]:
    keys = {e.key for e in singles}
    choices = [c for c in arms.all() if len(c.edits) == 1 and c.edits[0].key in keys]
    if not choices or not unsolved:
        return []
    return [(rng.choice(unsolved), rng.choice(choices)) for _ in range(n_cells)]


def _prompt_requests(state: SearchState, unsolved: list[int]) -> list[PromptRequest]:
    config = state.config
    if (
        config.strategy != "adaptive"
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
        ValueError: a result for a cell the step did not plan.
    """
    if results.step != state.step:
        raise StaleStepError(f"results are for step {results.step}, the state expects step {state.step}")
    plan = plan_step(state)
    new = state.model_copy(deep=True)
    if plan.stop_reason is not None:
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
        stats = new.cells.setdefault(f"{task}:{index}", CellStats())
        stats.attempts += 1
        stats.usable += int(result.usable)
        stats.successes += int(result.passed)
        new.spent.attempts += 1
        new.spent.tokens += result.tokens
        if result.passed and str(task) not in new.solved:
            new.solved[str(task)] = index  # type: ignore[assignment]
    _add_prompt_edits(new, pool, root, results)
    new.candidates = list(pool.items)
    new.prompt_requests += len(plan.prompt_requests)
    seen_results = [r for r in results.results if r.trial_id in seen]
    new.spent.wall_sec += results.wall_sec if results.wall_sec is not None else sum(r.wall_sec for r in seen_results)
    new.curve.append((new.spent.attempts, new.covered))
    new.step += 1
    new.stop_reason = _stop_reason(new)
    return new


def _add_prompt_edits(new: SearchState, pool: CandidatePool, root: HCPContract, results: StepResults) -> None:
    for edit in results.prompt_edits:
        try:
            candidate = make_candidate(root, [edit], origin="model", step=new.step)
        except CandidateError:
            new.rejected["invalid_prompt_edit"] = new.rejected.get("invalid_prompt_edit", 0) + 1
            continue
        if len(pool.items) >= new.config.max_candidates or not pool.add(candidate):
            new.rejected["duplicate_or_full"] = new.rejected.get("duplicate_or_full", 0) + 1
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
