"""What a generation's record keeps about its configuration search (pure: state in, JSON out)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from mindforge.search.state import SearchState


def search_summary(state: SearchState) -> dict[str, Any]:
    """What a generation's record keeps about its search: budget, spending, stop reason, coverage.

    Returns:
        JSON-ready: ``job_id``, ``budget``, ``spent``, ``stop_reason``, ``steps``,
        ``failing_tasks``, ``covered`` (cumulative), ``best_single`` (the candidate that
        solved the most failing tasks and how many), ``candidates`` and ``rejected``.
    """
    solved_by: dict[int, set[str]] = defaultdict(set)
    for key, stats in state.cells.items():
        task, cand = (int(part) for part in key.split(":"))
        if stats.successes:
            solved_by[cand].add(state.tasks[task].task_hash)
    best = max(sorted(solved_by), key=lambda i: len(solved_by[i]), default=None)
    return {
        "job_id": state.job_id,
        "budget": state.budget.model_dump(exclude_none=True),
        "spent": state.spent.model_dump(),
        "stop_reason": state.stop_reason,
        "steps": state.step,
        "failing_tasks": len(state.tasks),
        "covered": state.covered,
        "best_single": {
            "contract_hash": state.candidates[best].contract_hash if best is not None else None,
            "covered": len(solved_by[best]) if best is not None else 0,
        },
        "candidates": len(state.candidates),
        "rejected": dict(state.rejected),
    }


def ranked_candidates(state: SearchState) -> list[str]:
    """Contracts that passed a search trial, best first: failing tasks solved, then passes, then order.

    Returns:
        candidate contract hashes (the successor race's entrants, :mod:`mindforge.evaluation.race`).
    """
    solved: dict[int, set[int]] = defaultdict(set)
    passes: dict[int, int] = defaultdict(int)
    for key, stats in state.cells.items():
        task, cand = (int(part) for part in key.split(":"))
        if stats.successes:
            solved[cand].add(task)
            passes[cand] += stats.successes
    order = sorted(solved, key=lambda i: (-len(solved[i]), -passes[i], i))
    return list(dict.fromkeys(state.candidates[i].contract_hash for i in order))
