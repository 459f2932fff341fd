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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def search_facts(name: str, settings: Any) -> dict[str, Any] | None:
    """Generation 0's search: failed tasks (paths), trials spent, cumulative coverage, the best single contract."""
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
        for key, stats in state.cells.items():
            task, cand = (int(part) for part in key.split(":"))
            if stats.successes:
                solved.setdefault(state.candidates[cand].contract_hash, set()).add(state.tasks[task].task_hash)
        best = max(sorted(solved), key=lambda h: len(solved[h]), default=None)
        row = registry.get_contract(session=s, content_hash=best) if best else None
        toml = row.toml_text if row is not None else ""
        return {
            "tasks": [paths[t.task_hash] for t in state.tasks],
            "spent": state.spent.attempts,
            "covered": state.covered,
            "best": best,
            "best_covered": len(solved.get(best, set())) if best else 0,
            "toml": toml,
        }


def run_sweep(name: str, settings: Any) -> list[str]:
    """Run the sweep and return the lines to print (adaptive vs the sweep, and the ratio)."""
    from mindforge.agent.loop import ModelAgent
    from mindforge.hcp import loads_contract
    from mindforge.policy.server.server import start_policy_server
    from mindforge.tasks.loader import load_task
    from mindforge.trials.batch import evaluate
    from mindforge.trials.run import open_engine

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
    contract = loads_contract(facts["toml"], source=f"contract {facts['best'][:12]}")
    tasks = [load_task(Path(p)) for p in facts["tasks"]]
    attempts = max(1, -(-budget // n))  # round robin: whole rounds, then cut to the budget
    engine, image_map = open_engine(settings)
    server = start_policy_server("smollm2", engine="llamacpp")
    try:
        result = evaluate(
            tasks, lambda: ModelAgent(contract, base_url=server.base_url), engine, attempts=attempts,
            artifact_root=settings.artifacts, image_map=image_map, concurrency=2, run_id=f"{name}/sweep",
        )
    finally:
        server.stop()
    ran = sorted(result.records, key=lambda r: (r.attempt, r.task_id))[:budget]
    covered = len({r.task_hash for r in ran if r.passed})
    ratio = f"{facts['covered'] / covered:.1f}x" if covered else ("inf" if facts["covered"] else "-")
    met = "met" if covered == 0 and facts["covered"] > 0 or covered and facts["covered"] >= 3 * covered else "NOT met"
    return [
        head,
        f"best single contract {contract.ref} (covered {facts['best_covered']} in the adaptive run), swept round "
        f"robin over all {n} at the same budget ({len(ran)} trials): covered {covered}",
        f"adaptive / best single: {ratio} (target: at least 3x): {met}",
    ]
