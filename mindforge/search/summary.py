"""What a generation's record keeps about its configuration search (pure: state in, JSON out)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from mindforge.search.objective import pareto_front, ranked, scores
from mindforge.search.state import SearchState

#: candidates listed best first in a summary's ``ranking``
RANKING_SHOWN = 8


def search_summary(state: SearchState) -> dict[str, Any]:
    """What a generation's record keeps about its search.

    Returns:
        JSON-ready: ``job_id``, ``strategy``, ``budget``, ``spent``, ``stop_reason``,
        ``steps``, ``failing_tasks``, ``covered`` (cumulative coverage: a reported
        figure, never the objective), ``best_single`` (the candidate that solved the
        most failing tasks and how many), ``candidates``, ``rejected``, ``ranking``
        (the best candidates by the objective: ``contract_hash``, ``edits``,
        ``rate`` and ``sd`` of the posterior pass rate, ``trials``, ``passes``),
        ``pareto_front`` (contract hashes), ``race`` (round, quota, entrants with
        reason and status) and ``predictions`` (:func:`prediction_rows`).
    """
    solved_by: dict[int, set[str]] = defaultdict(set)
    for key, stats in state.cells.items():
        task, cand = (int(part) for part in key.split(":"))
        if stats.successes:
            solved_by[cand].add(state.tasks[task].task_hash)
    best = max(sorted(solved_by), key=lambda i: len(solved_by[i]), default=None)
    return {
        "job_id": state.job_id,
        "strategy": state.config.strategy,
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
        "ranking": [
            {
                "contract_hash": s.contract_hash,
                "edits": list(state.candidates[s.index].edit_keys),
                "rate": round(s.rate, 4),
                "sd": round(s.sd, 4),
                "trials": s.trials,
                "passes": s.passes,
            }
            for s in ranked(state)[:RANKING_SHOWN]
        ],
        "pareto_front": [state.candidates[i].contract_hash for i in pareto_front(state)],
        "race": {
            "round": state.race.round,
            "quota": state.race.quota,
            "entrants": [
                {"contract_hash": e.candidate.contract_hash, "reason": e.reason, "status": e.status}
                for e in state.entrants
            ],
        },
        "predictions": prediction_rows(state),
    }


def prediction_rows(state: SearchState) -> list[dict[str, Any]]:
    """Every stated prediction with its verdict, in candidate order (JSON-ready).

    Returns:
        one row per candidate with a prediction: ``contract_hash``, ``edits`` (keys),
        ``scope``, ``classes`` (audit clusters, ``*`` for every failing task), ``tasks``
        (how many it names), ``min_rate`` (the rate it claims), ``trials`` and
        ``passes`` on the named tasks, ``verdict`` and ``step`` (when it was reached).
    """
    rows = []
    for key in sorted(state.predictions, key=int):
        p, candidate = state.predictions[key], state.candidates[int(key)]
        rows.append(
            {
                "contract_hash": candidate.contract_hash,
                "edits": list(candidate.edit_keys),
                "scope": p.scope,
                "classes": list(p.classes),
                "tasks": len(p.tasks),
                "min_rate": p.min_rate,
                "trials": p.trials,
                "passes": p.passes,
                "verdict": p.verdict,
                "step": p.step,
            }
        )
    return rows


def ranked_candidates(state: SearchState) -> list[str]:
    """Contracts that passed a search trial, best first by the search's objective.

    The objective is the candidate's posterior pass rate on the search split's failing
    tasks (:mod:`mindforge.search.objective`); ties go to more trials, then to the
    earlier candidate. The successor race takes the first one or two
    (:mod:`mindforge.evaluation.race`).

    Returns:
        candidate contract hashes, each once.
    """
    return list(dict.fromkeys(s.contract_hash for s in ranked(state)))


__all__ = ["prediction_rows", "ranked_candidates", "scores", "search_summary"]
