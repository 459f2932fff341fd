"""The successor check after the configuration search: the search's best one or two contracts race the parent.

Each round ``plan_successor_check`` returns the next look's missing selection-split trials
(:func:`mindforge.evaluation.race.plan_race`, planned from the stored trials, so a retried
round re-plans the same ids, and none once the outcome is settled); the ExpansionWorkflow
runs them like a search step; then ``choose_successor`` decides by the gate's rule
(:func:`mindforge.evaluation.choose_successor`) and records the decision, with the race and
the generations whose trials it reused.
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
from workers.evaluation_activities import reused_trials, split_records


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

        The search's best contracts (``evaluation.successor_candidates``, ranked by
        :func:`mindforge.search.summary.ranked_candidates`) race the parent on the selection
        split: each runs ``race_budget // successor_candidates`` attempts per task, the parent
        ``evaluation.attempts`` (trials already stored, in this generation or an earlier one,
        are read, not run). Called once per look: it returns the look's missing trials
        (batched by contract, ``trial_batch_size``), and none when the outcome is settled,
        the race is over, or there is nothing to compare.
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
        ev = inp.evaluation
        config = RaceConfig(
            budget=ev.race_budget, parent_attempts=ev.attempts, min_tasks=max(1, ev.splits.min_tasks),
            resamples=ev.lift_resamples, seed=ev.seed,
        )
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
            candidate_hash=candidates[0], batches=batches, round=race.look, candidates=candidates,
            note="" if batches else (
                f"race over after look {race.look + 1} of {race.looks} on {len(tasks)} tasks: {race.run_trials} of "
                f"{race.full_trials} trials of the full race run" + (" (settled early)" if race.stopped_early else "")
            ),
        )

    @activity.defn(name="choose_successor")
    async def choose_successor(self, inp: SearchStepInput) -> SuccessorChoice:
        """Pick the next contract on selection evidence only (:func:`mindforge.evaluation.choose_successor`).

        Every raced candidate may be promoted, each judged at the Bonferroni level over
        how many raced. The decision, with ``decided_on: "selection"``, the ids of every
        trial it read, the generations whose trials it reused, its rule (with its error) in
        words and the race, goes to the generation record under ``successor``. Returns the choice.
        """
        return await asyncio.to_thread(self._choose, inp)

    def _choose(self, inp: SearchStepInput) -> SuccessorChoice:
        from mindforge.evaluation import choose_successor

        parent = PairRef(contract_hash=inp.contract_hash, adapter=inp.adapter)
        with store_engine.session_scope(self.engine) as s:
            race, candidates, records, tasks = self._race(s, inp)
            choice = choose_successor(
                records, parent, candidates, tasks, min_tasks=inp.evaluation.splits.min_tasks,
                resamples=inp.evaluation.lift_resamples, seed=inp.evaluation.seed,
            )
            if race is not None:
                choice.race = race.model_dump(mode="json", exclude={"trials", "trial_ids"})
            choice.reused = reused_trials(s, inp.lineage_id, inp.generation, PoolSplit.SELECTION, choice.trial_ids)
            lineages.update_generation(
                session=s, lineage_id=inp.lineage_id, index=inp.generation,
                record={"successor": choice.model_dump(mode="json")},
            )
            return choice

    def all(self) -> list[Any]:
        """Every activity of this class (all on the orchestration queue)."""
        return [self.plan_successor_check, self.choose_successor]
