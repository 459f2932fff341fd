"""The successor check after the configuration search: the search's leaders race the parent on selection.

Each round ``plan_successor_check`` returns the round's missing selection-split trials
(:func:`mindforge.evaluation.race.plan_race`, planned from the stored trials, so a retried
round re-plans the same ids); the ExpansionWorkflow runs them like a search step; then
``choose_successor`` decides on the race's finalist
(:func:`mindforge.evaluation.choose_successor`) and records the decision.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from temporalio import activity

from mindforge.evaluation import PairRef, PoolSplit, SuccessorChoice
from mindforge.payloads import RunTrialsInput, SearchStepInput, SuccessorCheckPlan, TrialSpec, TrialStage
from mindforge.store import engine as store_engine
from mindforge.store import lineages, pool, trials
from mindforge.store import search as search_repo
from workers.evaluation_activities import split_records


class SuccessorActivities:
    """Successor-check activities bound to one store (all on the orchestration queue).

    Args:
        engine: SQLAlchemy engine of the migrated store.
    """

    def __init__(self, engine) -> None:
        self.engine = engine

    @activity.defn(name="plan_successor_check")
    async def plan_successor_check(self, inp: SearchStepInput) -> SuccessorCheckPlan:
        """The successor race's next selection-split trials (:func:`mindforge.evaluation.race.plan_race`).

        The search's leading contracts (``evaluation.successor_candidates``) race on the
        selection split within ``evaluation.race_budget`` attempts per task; the parent runs
        ``evaluation.attempts`` in round 0. Called once per round: it returns the round's
        missing trials (batched by contract, ``trial_batch_size``), and none when the race
        is over or there is nothing to compare.
        """
        return await asyncio.to_thread(self._plan_successor, inp)

    def _race(self, s, inp: SearchStepInput) -> tuple[Any, list[str], list[Any], set[str]]:
        """(race plan or None, candidates, selection records, selection tasks) from the store."""
        from mindforge.evaluation.race import RaceConfig, plan_race
        from mindforge.search.summary import ranked_candidates
        from mindforge.store.search_state import load_state

        job = search_repo.get_search_job(session=s, job_id=inp.job_id) if inp.job_id else None
        state = load_state(session=s, job_id=inp.job_id) if job is not None and job.state else None
        ranked = [h for h in (ranked_candidates(state) if state else []) if h != inp.contract_hash]
        candidates = ranked[: inp.evaluation.successor_candidates]
        records, tasks = split_records(s, inp.lineage_id, inp.generation, PoolSplit.SELECTION)
        if not candidates or not tasks:
            return None, candidates, records, tasks
        config = RaceConfig(budget=inp.evaluation.race_budget, parent_attempts=inp.evaluation.attempts)
        parent = PairRef(contract_hash=inp.contract_hash, adapter=inp.adapter)
        return plan_race(records, parent, candidates, tasks, config), candidates, records, tasks

    def _plan_successor(self, inp: SearchStepInput) -> SuccessorCheckPlan:
        with store_engine.session_scope(self.engine) as s:
            race, candidates, _records, tasks = self._race(s, inp)
            if not candidates:
                return SuccessorCheckPlan(note="no search candidate solved a task")
            if race is None:
                return SuccessorCheckPlan(candidate_hash=candidates[0], note="no selection tasks: the parent is kept")
            paths = {t.id: t.path for t in pool.list_pool_tasks(session=s, lineage_id=inp.lineage_id)}
        by_contract: dict[str, list[TrialSpec]] = defaultdict(list)
        for t in race.trials:
            trial_id = trials.make_trial_id(
                lineage_id=inp.lineage_id, generation_index=inp.generation, stage=TrialStage.SELECTION.value,
                task_hash=t.task_hash, contract_hash=t.contract_hash, adapter=inp.adapter, attempt=t.attempt,
            )
            by_contract[t.contract_hash].append(
                TrialSpec(trial_id=trial_id, task_path=paths[t.task_hash], task_hash=t.task_hash, attempt=t.attempt)
            )
        size = inp.runtime.trial_batch_size
        batches = [
            RunTrialsInput(
                lineage_id=inp.lineage_id, generation=inp.generation, stage=TrialStage.SELECTION, contract_hash=h,
                adapter=inp.adapter, policy_url=inp.runtime.policy_url, trials=specs[i : i + size],
            )
            for h, specs in sorted(by_contract.items())
            for i in range(0, len(specs), size)
        ]
        return SuccessorCheckPlan(
            candidate_hash=candidates[0], batches=batches, round=race.round, candidates=candidates,
            note="" if batches else f"race over after {len(race.rounds)} round(s) on {len(tasks)} tasks",
        )

    @activity.defn(name="choose_successor")
    async def choose_successor(self, inp: SearchStepInput) -> SuccessorChoice:
        """Pick the next contract on selection evidence only (:func:`mindforge.evaluation.choose_successor`).

        Only the race's finalist may be promoted; every candidate's trials are read and
        recorded. The decision, with ``decided_on: "selection"``, the ids of every trial it
        read, its rule in words and the race's rounds, goes to the generation record under
        ``successor``. Returns the choice.
        """
        return await asyncio.to_thread(self._choose, inp)

    def _choose(self, inp: SearchStepInput) -> SuccessorChoice:
        from mindforge.evaluation import choose_successor

        parent = PairRef(contract_hash=inp.contract_hash, adapter=inp.adapter)
        with store_engine.session_scope(self.engine) as s:
            race, candidates, records, tasks = self._race(s, inp)
            finalists = None if race is None else ([race.finalist] if race.done and race.finalist else [])
            choice = choose_successor(
                records, parent, candidates, tasks, min_tasks=inp.evaluation.splits.min_tasks, finalists=finalists,
                resamples=inp.evaluation.lift_resamples, seed=inp.evaluation.seed,
            )
            if race is not None:
                choice.race = race.model_dump(mode="json", exclude={"trials", "trial_ids"})
            lineages.update_generation(
                session=s, lineage_id=inp.lineage_id, index=inp.generation,
                record={"successor": choice.model_dump(mode="json")},
            )
            return choice

    def all(self) -> list[Any]:
        """Every activity of this class (all on the orchestration queue)."""
        return [self.plan_successor_check, self.choose_successor]
