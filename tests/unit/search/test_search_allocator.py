"""The coverage allocator (``strategy="adaptive"``) and what every strategy shares: budgets, refusals, determinism.

The coverage allocator was the search's default before the race (:mod:`mindforge.search.racing`,
``tests/unit/search/test_search_race.py``); it stays as a named strategy, the baseline of
``benchmarks/bench_search.py`` and the allocator of states stored under it.

Trial outcomes come from :class:`benchmarks.simulate.UnlockOracle` (each task is
unlocked by one harness property, a noisy policy succeeds with p = 0.6 when unlocked),
standing in for sandbox + policy so the real allocator runs hundreds of attempts in
a second; audits are computed by the real audit rules on simulated base transcripts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.simulate import SIM_EXAMPLES, UnlockOracle, base_search_tasks, make_unlock_tasks
from mindforge.hcp import derive, load_contract
from mindforge.search import (
    BudgetTooSmallError,
    CellResult,
    CostEstimate,
    Edit,
    NoCandidatesError,
    SearchBudget,
    SearchConfig,
    SearchState,
    StaleStepError,
    StepResults,
    init_search,
    observe,
    plan_step,
    run_search,
)
from mindforge.search.coverage import Ledger

REPO = Path(__file__).resolve().parents[3]
ROOT = derive(
    load_contract(REPO / "hcp_contracts" / "baseline.toml"),
    name="bench",
    revision="1.0.0",
    edit="tools: bash and finish only",
    changes={"tools.allow": ["bash", "finish"]},
)
KINDS = ["tool:read_file", "observation", "turns", "plan", "skill:run_tests.sh", "format", "error_output"]


def problem(n_tasks: int = 14, seed: int = 0, kinds=KINDS):
    tasks = make_unlock_tasks(n_tasks, kinds)
    return tasks, base_search_tasks(tasks, ROOT), UnlockOracle(ROOT, tasks, seed=seed)


def run(state: SearchState, oracle: UnlockOracle) -> SearchState:
    holder = {"state": state}

    def execute(plan):
        return oracle.execute(holder["state"], plan)

    while not holder["state"].done:
        plan = plan_step(holder["state"])
        results = execute(plan) if plan.stop_reason is None else StepResults(step=plan.step)
        holder["state"] = observe(holder["state"], results)
    return holder["state"]


@pytest.mark.parametrize("selection", ["ucb", "thompson"])
def test_adaptive_search_reaches_full_coverage_within_budget(selection: str) -> None:
    tasks, failing, oracle = problem()
    assert len(failing) == len(tasks)  # the base contract fails them all
    config = SearchConfig(strategy="adaptive", selection=selection)
    state = init_search(job_id="job", root=ROOT, tasks=failing, budget=SearchBudget(max_attempts=300), config=config)
    state = run(state, oracle)
    assert state.stop_reason == "full_coverage"
    assert state.covered == len(tasks) and state.spent.attempts <= 300
    ledger = Ledger(tasks=[t.task_hash for t in failing])
    for key, cell in state.cells.items():
        t, c = (int(x) for x in key.split(":"))
        for i in range(cell.attempts):
            ledger.add(failing[t].task_hash, state.candidates[c].contract_hash, 1.0 if i < cell.successes else 0.0)
    summary = ledger.summary()
    assert summary.cumulative == len(tasks)
    assert summary.single_contract < summary.cumulative  # no one contract unlocks every task
    best_possible = max(
        sum(oracle.unlocks(t.task_hash, oracle.contracts[c.contract_hash]) for t in failing) for c in state.candidates
    )
    assert summary.single_contract <= best_possible < len(tasks)
    assert state.curve[0] == (0, 0) and state.curve[-1] == (state.spent.attempts, len(tasks))
    assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(state.curve, state.curve[1:], strict=False))
    # every candidate has a parent and a recorded edit chain; none repeats a harness
    assert len({c.harness_hash for c in state.candidates}) == len(state.candidates)
    assert all(c.parent_hash and c.edits for c in state.candidates)


def test_adaptive_beats_random_search_on_the_same_problem() -> None:
    spent = {}
    for strategy in ("adaptive", "random"):
        tasks, failing, oracle = problem(seed=3)
        config = SearchConfig(seed=3, strategy="adaptive" if strategy == "adaptive" else "random")
        state = init_search(job_id="j", root=ROOT, tasks=failing, budget=SearchBudget(max_attempts=3000), config=config)
        state = run(state, oracle)
        assert state.stop_reason == "full_coverage"
        spent[strategy] = state.spent.attempts
    assert spent["adaptive"] * 2 <= spent["random"], spent


@pytest.mark.parametrize(
    ("budget", "cost", "reason"),
    [
        (SearchBudget(max_attempts=40), CostEstimate(), "budget_attempts"),
        (SearchBudget(max_tokens=100_000), CostEstimate(tokens_per_attempt=3000), "budget_tokens"),
        (SearchBudget(max_wall_sec=900), CostEstimate(wall_sec_per_attempt=30), "budget_time"),
    ],
)
def test_search_stops_on_each_budget_and_records_why(budget, cost, reason) -> None:
    _tasks, failing, oracle = problem(n_tasks=20, kinds=["plan", "verify", "skill:find_files.sh", "temperature"])
    state = init_search(job_id="b", root=ROOT, tasks=failing, budget=budget, cost=cost)
    state = run(state, oracle)
    assert state.stop_reason == reason
    if reason == "budget_attempts":
        assert state.spent.attempts == 40  # the last step is cut to the remaining budget
    if reason == "budget_tokens":
        assert 100_000 <= state.spent.tokens < 100_000 + 3000 * 16


def test_a_budget_for_fewer_than_two_candidates_is_refused_before_it_starts() -> None:
    _tasks, failing, _oracle = problem()
    with pytest.raises(BudgetTooSmallError, match="fewer than two candidates"):
        init_search(job_id="x", root=ROOT, tasks=failing, budget=SearchBudget(max_attempts=5))
    with pytest.raises(BudgetTooSmallError, match="tokens"):
        init_search(
            job_id="x",
            root=ROOT,
            tasks=failing,
            budget=SearchBudget(max_tokens=10_000),
            cost=CostEstimate(tokens_per_attempt=2000),
        )
    with pytest.raises(BudgetTooSmallError, match=" s allows"):
        init_search(
            job_id="x",
            root=ROOT,
            tasks=failing,
            budget=SearchBudget(max_wall_sec=60),
            cost=CostEstimate(wall_sec_per_attempt=30),
        )
    ok = init_search(job_id="x", root=ROOT, tasks=failing, budget=SearchBudget(max_attempts=6))
    assert not ok.done
    with pytest.raises(NoCandidatesError):
        init_search(
            job_id="x",
            root=ROOT,
            tasks=failing,
            budget=SearchBudget(max_attempts=100),
            config=SearchConfig(edit_keys=["max_turns=60"]),
        )
    with pytest.raises(ValueError, match="needs max_attempts"):
        SearchBudget()


def test_no_failing_tasks_is_full_coverage_at_once() -> None:
    state = init_search(job_id="x", root=ROOT, tasks=[], budget=SearchBudget(max_attempts=10))
    assert state.done and state.stop_reason == "full_coverage"


def test_search_stops_when_no_candidate_is_left() -> None:
    _tasks, failing, oracle = problem(n_tasks=3, kinds=["verify"])
    config = SearchConfig(
        strategy="adaptive", edit_keys=["max_turns=60", "temperature=0.0"], max_attempts_per_cell=2, compose_top=0
    )
    state = init_search(job_id="n", root=ROOT, tasks=failing, budget=SearchBudget(max_attempts=500), config=config)
    state = run(state, oracle)
    assert state.stop_reason == "no_candidates"
    assert state.spent.attempts == 3 * 2 * 2  # every cell up to its cap, nothing more
    stray = CellResult(trial_id="s-x", task_hash=failing[0].task_hash, contract_hash="c", attempt=0, reward=1.0)
    with pytest.raises(ValueError, match="stops the search"):
        observe(state, StepResults(step=state.step, results=[stray]))


def test_plans_are_deterministic_given_the_state() -> None:
    _tasks, failing, oracle = problem()
    state = init_search(job_id="d", root=ROOT, tasks=failing, budget=SearchBudget(max_attempts=300))
    state = run_search(state, lambda plan: oracle.execute(state, plan), max_steps=1)
    plan = plan_step(state)
    again = plan_step(SearchState.model_validate_json(state.model_dump_json()))
    assert plan == again and plan.cells
    assert len(state.model_dump_json()) < 50_000  # small enough to carry through a workflow


def test_observe_counts_each_planned_trial_once_and_refuses_stale_or_unplanned_results() -> None:
    _tasks, failing, oracle = problem()
    state = init_search(job_id="o", root=ROOT, tasks=failing, budget=SearchBudget(max_attempts=300))
    plan = plan_step(state)
    results = oracle.execute(state, plan)
    doubled = StepResults(step=plan.step, results=results.results + results.results[:3])
    after = observe(state, doubled)
    assert after.spent.attempts == len(plan.cells) and after.step == 1
    assert len(after.candidates) == len(plan.new_candidates)
    with pytest.raises(StaleStepError):
        observe(after, results)
    stray = CellResult(trial_id="s-x", task_hash=failing[0].task_hash, contract_hash="c", attempt=0, reward=1.0)
    with pytest.raises(ValueError, match="not a cell planned"):
        observe(state, StepResults(step=0, results=[stray]))
    # partial results: the unobserved cells are not counted
    partial = observe(state, StepResults(step=0, results=results.results[:2]))
    assert partial.spent.attempts == 2


def test_prompt_proposals_are_requested_and_added_once() -> None:
    _tasks, failing, _oracle = problem()
    state = init_search(job_id="p", root=ROOT, tasks=failing, budget=SearchBudget(max_attempts=300))
    plan = plan_step(state)
    assert len(plan.prompt_requests) == 1
    request = plan.prompt_requests[0]
    assert request.audits and all(a.task_id for a in request.audits)
    edit = Edit(op="append_prompt", value="Check every requirement of the task by running it before you finish.")
    after = observe(state, StepResults(step=0, prompt_edits=[edit, edit], prompt_rejections=["bad json"]))
    model = [c for c in after.candidates if c.origin == "model"]
    assert len(model) == 1 and model[0].edits == [edit]
    assert after.rejected == {"duplicate_or_full": 1, "prompt_rejected": 1}
    assert after.prompt_requests == 1


def test_a_task_needing_two_edits_is_solved_by_a_composed_candidate() -> None:
    kinds = ["tool:read_file", "plan", "combo:read_file+plan", "observation"]
    tasks, failing, oracle = problem(n_tasks=8, kinds=kinds, seed=2)
    config = SearchConfig(strategy="adaptive")
    state = run(
        init_search(job_id="c", root=ROOT, tasks=failing, budget=SearchBudget(max_attempts=400), config=config), oracle
    )
    assert state.stop_reason == "full_coverage"
    combo = [i for i, t in enumerate(failing) if "combo" in t.task_id]
    solvers = [state.candidates[state.solved[str(i)]] for i in combo]
    assert solvers and all({"add_tool=read_file", "hook_on=plan_first"} <= set(c.edit_keys) for c in solvers)
    assert all(c.origin in ("compose", "refine") for c in solvers)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_command_format_with_examples_is_found_from_the_plain_json_baseline(seed: int) -> None:
    """The small-model case: nothing parses under JSON; only the command format AND a worked example solve it.

    No single edit solves anything, but the command format shows progress (its attempts
    fail as wrong answers, not parse failures): the allocator refines that stepping stone
    and reaches the two-edit composition within a small budget, from the shipped baseline.
    Every worked example alone gets past the parse failure on half its attempts (the
    simulation's partial stepping stone), so the examples the search is given compete
    with it. No ranking puts the command format first: measured progress decides.
    """
    baseline = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    tasks = make_unlock_tasks(4, ["combo:command+example"])
    failing = base_search_tasks(tasks, baseline)
    assert {t.rule for t in failing} == {"config.parse_failure"}
    oracle = UnlockOracle(baseline, tasks, seed=seed)
    config = SearchConfig(strategy="adaptive", seed=seed, examples=SIM_EXAMPLES)
    start = init_search(
        job_id="small", root=baseline, tasks=failing, budget=SearchBudget(max_attempts=160), config=config
    )
    state = run(start, oracle)
    assert state.stop_reason == "full_coverage" and state.spent.attempts <= 160
    for t in range(len(failing)):
        solver = state.candidates[state.solved[str(t)]]
        assert "action_format=command" in solver.edit_keys and any(e.op == "add_example" for e in solver.edits)
        assert len(solver.edits) <= 3 and solver.origin in ("progress", "refine", "compose")
    assert any(cell.progress for cell in state.cells.values())


def test_without_the_progress_signal_the_pair_is_never_reached() -> None:
    """Ablation: when no audit rule comes back from the attempts, no stepping stone exists and nothing is solved."""
    baseline = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    tasks = make_unlock_tasks(4, ["combo:command+example"])
    failing = base_search_tasks(tasks, baseline)
    oracle = UnlockOracle(baseline, tasks, seed=0, report_rules=False)
    config = SearchConfig(strategy="adaptive", examples=SIM_EXAMPLES)
    budget = SearchBudget(max_attempts=120)
    state = run(init_search(job_id="abl", root=baseline, tasks=failing, budget=budget, config=config), oracle)
    assert state.stop_reason == "budget_attempts" and state.covered == 0
    assert not any(c.origin == "progress" for c in state.candidates)

