"""The best-single-contract sweep of ``bench_breadth``: one contract on every failed instance, at the search's budget.

The source paper reports adaptive search's cumulative coverage of the tasks the frozen base
failed (122/122) beside the best single configuration swept over the whole set (11/122).
Here, on generation 0 of a lineage: the tasks are the search split's instances its base pair
failed (the search's own task list), the budget is the trials the adaptive search spent on
them, and the single contract is the candidate that covered the most of them in the
adaptive run (chosen in hindsight: the most favourable single choice). The sweep runs that
contract on every failed instance round robin (attempt 0 on all of them, then attempt 1, ...)
until it has spent the budget, against a fresh llama.cpp policy server, and counts the
instances it passed. Coverage is an upper bound across contracts (adaptive) or one
contract's reach (sweep) on the searched instances, not skill.

Beside it, what the search optimises: the pass rate of the contract the search chose (its
first-ranked candidate, which the successor race takes first), swept the same way on the
same instances at the same budget, against the best single contract's. Target: at least
0.9x.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: trials at once in a sweep (threads; the main job runs 12 on 2 CPUs)
SWEEP_AT_ONCE = 12


def search_facts(name: str, settings: Any) -> dict[str, Any] | None:
    """Generation 0's search: failed tasks (paths), trials spent, coverage, the chosen and the best single contract.

    Returns:
        None without a stored search; else ``{"tasks": [path], "spent": trials, "covered":
        tasks, "best": hash, "best_covered": tasks, "chosen": hash or None, "chosen_trials":
        trials, "chosen_passes": passes, "tomls": {hash: toml}}``. ``chosen`` is the
        search's first-ranked candidate (what the successor race takes first); ``best`` the
        candidate that covered the most failed tasks, ties to the most passes.
    """
    from mindforge.search.objective import ranked
    from mindforge.store import engine as se
    from mindforge.store import pool, registry
    from mindforge.store import search as search_repo
    from mindforge.store.search_state import load_state

    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        jobs = search_repo.list_search_jobs(session=s, lineage_id=name, generation_index=0)
        if not jobs:
            return None
        state = load_state(session=s, job_id=jobs[0].id)
        if state is None:
            return None
        paths = {t.id: t.path for t in pool.list_pool_tasks(session=s, lineage_id=name)}
        solved: dict[str, set[str]] = {}
        passes: dict[str, int] = {}
        for key, stats in state.cells.items():
            task, cand = (int(part) for part in key.split(":"))
            h = state.candidates[cand].contract_hash
            passes[h] = passes.get(h, 0) + stats.successes
            if stats.successes:
                solved.setdefault(h, set()).add(state.tasks[task].task_hash)
        best = max(sorted(solved), key=lambda h: (len(solved[h]), passes.get(h, 0)), default=None)
        top = ranked(state)
        chosen = top[0].contract_hash if top else None
        tomls = {}
        for h in {h for h in (best, chosen) if h is not None}:
            row = registry.get_contract(session=s, content_hash=h)
            tomls[h] = row.toml_text if row is not None else ""
        return {
            "tasks": [paths[t.task_hash] for t in state.tasks],
            "spent": state.spent.attempts,
            "covered": state.covered,
            "best": best,
            "best_covered": len(solved.get(best, set())) if best else 0,
            "chosen": chosen,
            "chosen_trials": top[0].trials if top else 0,
            "chosen_passes": top[0].passes if top else 0,
            "tomls": tomls,
        }


def _sweep(contract: Any, tasks: list[Any], budget: int, base_url: str, settings: Any, run_id: str) -> list[Any]:
    """``contract`` on every task round robin (attempt 0 on all, then 1, ...) for ``budget`` trials; the records."""
    from mindforge.agent.loop import ModelAgent
    from mindforge.trials.batch import evaluate
    from mindforge.trials.run import open_engine

    engine, image_map = open_engine(settings)
    attempts = max(1, -(-budget // len(tasks)))  # whole rounds, then cut to the budget
    result = evaluate(
        tasks, lambda: ModelAgent(contract, base_url=base_url), engine, attempts=attempts,
        artifact_root=settings.artifacts, image_map=image_map, concurrency=SWEEP_AT_ONCE, run_id=run_id,
    )
    return sorted(result.records, key=lambda r: (r.attempt, r.task_id))[:budget]


def run_sweep(name: str, settings: Any) -> list[str]:
    """Run the sweeps and return the lines to print.

    Two comparisons on generation 0's base-failed search instances, at the search's budget:
    coverage (adaptive across its candidates against the best single contract swept; target
    at least 3x) and pass rate (the search's chosen contract swept against the best single
    contract swept, the same tasks and attempts; target at least 0.9x).
    """
    from benchmarks.rollout_parts import rate_text
    from mindforge.hcp import loads_contract
    from mindforge.policy.server.server import start_policy_server
    from mindforge.tasks.loader import load_task

    facts = search_facts(name, settings)
    if facts is None or not facts["tasks"]:
        return ["no search in generation 0: nothing to sweep"]
    n, budget = len(facts["tasks"]), facts["spent"]
    head = (
        f"generation 0's base pair failed {n} search instance(s); the adaptive search spent {budget} trials and "
        f"covered {facts['covered']} (cumulative, across its candidates)"
    )
    if not facts["best"]:
        return [head, "no candidate passed a trial: no single contract to sweep (coverage 0 both ways)"]
    tasks = [load_task(Path(p)) for p in facts["tasks"]]
    hashes = list(dict.fromkeys([facts["best"], facts["chosen"]]))
    contracts = {h: loads_contract(facts["tomls"][h], source=f"contract {h[:12]}") for h in hashes}
    server = start_policy_server("smollm2", engine="llamacpp")
    try:
        ran = {h: _sweep(c, tasks, budget, server.base_url, settings, f"{name}/sweep-{h[:8]}")
               for h, c in contracts.items()}
    finally:
        server.stop()
    best = ran[facts["best"]]
    covered = len({r.task_hash for r in best if r.passed})
    ratio = f"{facts['covered'] / covered:.1f}x" if covered else ("inf" if facts["covered"] else "-")
    met = "met" if covered == 0 and facts["covered"] > 0 or covered and facts["covered"] >= 3 * covered else "NOT met"
    lines = [
        head,
        f"best single contract {contracts[facts['best']].ref} (covered {facts['best_covered']} in the adaptive run), "
        f"swept round robin over all {n} at the same budget ({len(best)} trials): covered {covered}, "
        f"passed {rate_text(sum(r.passed for r in best), len(best))}",
        f"adaptive coverage / best single's: {ratio} (target: at least 3x): {met}",
    ]
    chosen = ran[facts["chosen"]]
    best_rate = sum(r.passed for r in best) / max(len(best), 1)
    chosen_rate = sum(r.passed for r in chosen) / max(len(chosen), 1)
    same = " (the same contract)" if facts["chosen"] == facts["best"] else ""
    pass_ratio = chosen_rate / best_rate if best_rate else (1.0 if chosen_rate == 0 else float("inf"))
    lines += [
        f"the search's chosen contract {contracts[facts['chosen']].ref}{same} (in the search: "
        f"{facts['chosen_passes']} of {facts['chosen_trials']} trials), swept the same way: "
        f"passed {rate_text(sum(r.passed for r in chosen), len(chosen))}",
        f"chosen / best single pass rate: {pass_ratio:.2f}x (target: at least 0.9x): "
        f"{'met' if pass_ratio >= 0.9 else 'NOT met'}",
    ]
    return lines
