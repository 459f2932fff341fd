"""The Update's on-policy loop, store side: plan the Update, plan each draw, select groups, record iterations.

**One contract.** Update trains under one *training contract*, decided before it starts:
the contract Expansion's successor check chose on the selection split (else the
parent's). Its rollouts, its training trials, the promotion gate and the successor pair
all use that contract's harness; a trial or pair under another harness is an
:class:`~mindforge.evaluation.on_contract.OffContractError` (non-retryable), never a
fallback. When the training contract passed none of this generation's search-split
trials (and, with on-policy iterations, none of the first iteration's rollouts), Update
records that it passed nothing and trains nothing.

**Why decide the contract first** (rather than training under the search's leading
candidate and deciding the pair together): the selection split then makes two separate,
paired decisions - harness (Expansion: successor vs parent contract, both with the
parent's adapter) and weights (Update: new vs parent adapter, both under the successor
contract) - so every lift splits into a harness part and a weights part, and the
adapter is judged under the prompts it was trained on. The cost: when the successor
check keeps a contract the model cannot pass, Update trains nothing that generation.

Every activity writes its part under ``record["update"]`` (``plan``, ``rollouts``,
``selection``, ``iterations``). Search-split tasks only.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity

from mindforge.errors import InputError
from mindforge.evaluation import PoolSplit
from mindforge.evaluation.on_contract import OffContractError, harness_key
from mindforge.payloads import (
    GuideRef,
    RecordIterationInput,
    RolloutDrawInput,
    RolloutPlan,
    SelectTrajectoriesInput,
    SelectTrajectoriesResult,
    TrialSpec,
    TrialStage,
    UpdateInput,
    UpdatePlan,
)
from mindforge.policy.handoff import versioned_adapter_name
from mindforge.store import engine as store_engine
from mindforge.store import pool, registry, trials
from mindforge.store.errors import ContractNotRegisteredError
from mindforge.trainer import curriculum
from mindforge.trainer.selection import select_groups
from workers.evaluation_activities import lineage_readings, split_tasks
from workers.update_activities import TRAINED_STAGES, merge_update_record, non_retryable_error, successor_contract

#: stages whose trials estimate a task's pass rate before the loop: base evaluation and search
PRIOR_STAGES = frozenset({TrialStage.EXPANSION.value, TrialStage.SEARCH.value})


def rollout_round(iteration: int, draw: int) -> str:
    """The trial-id round key of one draw of one iteration (``"i<iteration>.d<draw>"``)."""
    return f"i{iteration}.d{draw}"


class IterationActivities:
    """Store activities of the Update's on-policy loop, bound to one store.

    Args:
        engine: a SQLAlchemy engine of the migrated store.
    """

    def __init__(self, engine) -> None:
        self.engine = engine

    @activity.defn(name="plan_update")
    async def plan_update(self, inp: UpdateInput) -> UpdatePlan:
        """Decide the training contract and the revision's name; say when the contract passed nothing.

        The training contract is ``successor_contract_hash`` or the parent's. When the
        generation ran search-split trials under it (base evaluation, search) and none
        passed, ``contract_hash`` is "" and ``note`` says so: rollouts could hold no group
        with contrast. Recorded under ``update.plan``.

        Raises:
            ApplicationError: non-retryable ``InputError`` when the spec has no base model path.
        """
        try:
            return await asyncio.to_thread(self._plan_update, inp)
        except InputError as exc:
            raise non_retryable_error(exc) from exc

    def _plan_update(self, inp: UpdateInput) -> UpdatePlan:
        if not inp.update.base_model_path:
            reason = "the Update stage needs a local base model directory to train on"
            raise InputError(f"lineage {inp.lineage_id} spec", "base_model_path", reason)
        preferred = [h for h in (inp.successor_contract_hash, inp.contract_hash) if h]
        with store_engine.session_scope(self.engine) as s:
            search = _search_hashes(s, inp.lineage_id)
            rows = trials.list_trials(session=s, lineage_id=inp.lineage_id, generation_index=inp.generation)
            on_search = [r.to_record() for r in rows if r.stage in PRIOR_STAGES and r.task_hash in search]
            best, ranked = curriculum.best_search_contract(on_search, preferred, parent=inp.contract_hash)
            adapters = registry.list_adapters(session=s, lineage_id=inp.lineage_id)
            prefix = versioned_adapter_name(inp.lineage_id, inp.generation, 0)[:-1]
            mine = [a for a in adapters if a.name.startswith(prefix)]  # a rerun of this generation's Update
            revision = mine[0].revision if mine else len(adapters)
            parent = registry.get_adapter_by_name(session=s, name=inp.adapter) if inp.adapter else None
            evidence = {ev.contract_hash: ev for ev in ranked}
            if best is not None:
                ev = evidence[best]
                which = (
                    "Expansion's successor" if best == inp.successor_contract_hash
                    else "the parent's contract" if best == inp.contract_hash else "a search candidate"
                )
                note = (
                    f"trains under the best contract by search-split evidence ({which}): it passed {ev.passes} of "
                    f"{ev.trials} search-split trials, {ev.tasks_passed} search task(s) counting "
                    f"{ev.inherited_tasks} the parent passed where it did not run"
                )
            elif on_search:
                note = f"no contract passed any of the generation's {len(on_search)} search-split trials: no signal"
            elif inp.update.iterations:
                best = inp.successor_contract_hash or inp.contract_hash
                note = "no search-split trial ran this generation: the rollouts draw under the generation's contract"
            else:
                note = "no search-split trial ran this generation and there are no rollouts: nothing to train"
            chosen = evidence.get(best) if best else None
            plan = UpdatePlan(
                contract_hash=best or "", note=note,
                on_contract_trials=chosen.trials if chosen else 0, on_contract_passes=chosen.passes if chosen else 0,
                adapter_name=versioned_adapter_name(inp.lineage_id, inp.generation, revision), revision=revision,
                parent_adapter_path=parent.path if parent is not None else None,
            )
            ranking = [ev.model_dump() for ev in ranked[:8]]
            merge_update_record(
                s, inp.lineage_id, inp.generation,
                {"plan": {**plan.model_dump(mode="json"), "contract": best or "", "search_evidence": ranking}},
            )
        return plan

    @activity.defn(name="plan_rollout_trials")
    async def plan_rollout_trials(self, inp: RolloutDrawInput) -> RolloutPlan:
        """One draw of one iteration: ``group_size`` rollouts of each task the curriculum or the redraw picks.

        Draw 0 takes up to ``tasks_per_iteration`` tasks whose pass rate under the training
        contract - pooled over this generation's base-evaluation and search trials and the
        Update's earlier rollouts - lies strictly between 0 and 1, unseen tasks filling the
        rest (:func:`mindforge.trainer.curriculum.pick_tasks`). A later draw replaces the
        flat groups of the draws before it with groups of the tasks that showed variance
        (:func:`mindforge.trainer.curriculum.redraw_tasks`, DAPO's dynamic sampling), until
        ``tasks_per_iteration`` groups have signal. Ids name the iteration and the draw
        (:func:`rollout_round`), so a retry runs none twice and counts none twice.

        Raises:
            StageSplitError: a planned trial's task is not on the search split
                (non-retryable by name: ``workflows.options.NON_RETRYABLE``).
            ApplicationError: non-retryable (``ContractNotRegisteredError``) when the
                training contract is not registered.
        """
        try:
            return await asyncio.to_thread(self._plan_draw, inp)
        except ContractNotRegisteredError as exc:
            raise non_retryable_error(exc) from exc

    def _plan_draw(self, inp: RolloutDrawInput) -> RolloutPlan:
        spec = inp.update
        with store_engine.session_scope(self.engine) as s:
            rollout_contract = _rollout_contract(s, inp.contract_hash, inp.adapter)
            listed = pool.list_pool_tasks(session=s, lineage_id=inp.lineage_id, split=PoolSplit.SEARCH)
            tasks = {t.id: t for t in listed}
            guides = training_guides(s, inp.contract_hash, set(tasks)) if spec.guidance else {}
            if inp.draw == 0:
                rows = trials.list_trials(session=s, lineage_id=inp.lineage_id, generation_index=inp.generation)
                harness = same_harness(s, inp.contract_hash, {r.contract_hash or "" for r in rows})
                on = [r.to_record() for r in rows if r.stage in TRAINED_STAGES and r.contract_hash in harness]
                rates = curriculum.pass_rates(on, sorted(tasks))
                family_of = lineage_readings(s, inp.lineage_id).family_of
                pick = curriculum.pick_tasks(
                    rates, spec.tasks_per_iteration, salt=str(inp.iteration), guided=guides.keys(),
                    prior=curriculum.family_prior(rates, family_of),
                )
                guided = f", {pick.guided} never passed with a guide" if spec.guidance else ""
                chosen, note = pick.tasks, (
                    f"curriculum: {pick.eligible_seen} tasks with 0 < pass rate < 1, {pick.unseen} unseen{guided}; "
                    f"set aside {pick.never_passed} never passed, {pick.always_passed} always passed"
                )
                if not chosen:
                    note = "no search task has a pass rate strictly between 0 and 1 under the training contract"
            else:
                groups = _draw_groups(s, inp.draws)
                signal = sum(
                    1 for h, rewards in groups
                    if curriculum.has_signal(rewards, guides[h].reward if h in guides else None)
                )
                pooled: dict[str, list[float]] = {}
                for task_hash, rewards in groups:
                    pooled.setdefault(task_hash, []).extend(rewards)
                chosen = curriculum.redraw_tasks(pooled, spec.tasks_per_iteration - signal)
                note = f"redraw of {len(chosen)} groups: {signal} of {len(groups)} groups so far had signal"
            specs = []
            for k, task_hash in enumerate(chosen):
                task = tasks[task_hash]
                for a in range(spec.group_size):
                    attempt = k * spec.group_size + a
                    trial_id = trials.make_trial_id(
                        lineage_id=inp.lineage_id, generation_index=inp.generation, stage=TrialStage.ROLLOUT.value,
                        task_hash=task_hash, contract_hash=rollout_contract, adapter=inp.adapter, attempt=attempt,
                        round_key=rollout_round(inp.iteration, inp.draw),
                    )
                    specs.append(
                        TrialSpec(trial_id=trial_id, task_path=task.path, task_hash=task_hash, attempt=attempt)
                    )
            pool.check_trial_splits(
                session=s, lineage_id=inp.lineage_id, stage=TrialStage.ROLLOUT,
                trials=[(t.trial_id, t.task_hash) for t in specs],
            )
            part = {
                "iteration": inp.iteration, "draw": inp.draw, "tasks": len(chosen), "trials": len(specs), "note": note
            }
            merge_update_record(s, inp.lineage_id, inp.generation, {"rollouts": part})
        return RolloutPlan(contract_hash=rollout_contract, tasks=chosen, trials=specs, note=note)

    @activity.defn(name="select_trajectories")
    async def select_trajectories(self, inp: SelectTrajectoriesInput) -> SelectTrajectoriesResult:
        """GRPO groups from one iteration's rollouts (or, offline, the generation's on-contract trials).

        A task's draws pool into one group (same prompt, same policy); groups whose
        rewards are all equal are dropped. Only search-split tasks are read. Recorded
        under ``update.selection``.

        With ``update.guidance``, a flat group whose rollouts all failed is kept when its
        task has a guide in the training contract's snapshot (:func:`training_guides`).

        Raises:
            ApplicationError: non-retryable ``OffContractError`` when a listed trial ran
                under another contract than the training contract, and
                ``ContractNotRegisteredError`` (guidance) when that contract is not registered.
        """
        try:
            return await asyncio.to_thread(self._select, inp)
        except (OffContractError, ContractNotRegisteredError) as exc:
            raise non_retryable_error(exc) from exc

    def _select(self, inp: SelectTrajectoriesInput) -> SelectTrajectoriesResult:
        with store_engine.session_scope(self.engine) as s:
            # selection and sealed tasks are never trained on
            not_search = split_tasks(s, inp.lineage_id, PoolSplit.SELECTION) | split_tasks(
                s, inp.lineage_id, PoolSplit.SEALED
            )
            off = 0
            draws: list[list[Any]] = []
            if inp.trial_ids is None:
                rows = trials.list_trials(session=s, lineage_id=inp.lineage_id, generation_index=inp.generation)
                mine = [r.to_record() for r in rows if r.stage in TRAINED_STAGES]
                harness = same_harness(s, inp.contract_hash, {r.contract_hash or "" for r in mine})
                records = [r for r in mine if r.contract_hash in harness]
                off = len(mine) - len(records)
            else:
                for ids in inp.trial_ids:
                    draws.append([r.to_record() for i in ids if (r := trials.get_trial(session=s, trial_id=i))])
                records = [r for d in draws for r in d]
                harness = same_harness(s, inp.contract_hash, {r.contract_hash or "" for r in records})
                wrong = next((r for r in records if r.contract_hash not in harness), None)
                if wrong is not None:
                    raise OffContractError("training", inp.contract_hash, wrong.contract_hash or "", wrong.trial_id)
            audits = {
                a.trial_id: a
                for a in trials.list_audits(session=s, lineage_id=inp.lineage_id, generation_index=inp.generation)
            }
            guides = (
                training_guides(s, inp.contract_hash, _search_hashes(s, inp.lineage_id)) if inp.update.guidance else {}
            )
            report = select_groups(
                records, not_search, max_groups_per_task=inp.update.max_groups_per_task,
                max_trials_per_group=inp.update.max_trials_per_group, audits=audits, guides=guides,
            )
            groups = [g for d in draws for g in curriculum.group_rewards(d).values()]
            rewards = [float(r.reward) for r in records if r.has_real_reward and r.reward is not None]
            result = SelectTrajectoriesResult(
                report=report, rollouts=len(rewards), passed=sum(1 for r in records if r.passed),
                mean_reward=sum(rewards) / len(rewards) if rewards else 0.0,
                groups_drawn=len(groups), flat_groups=sum(1 for g in groups if curriculum.is_flat(g)),
                guided_groups=report.guided_groups,
                off_contract_trials=off,
            )
            counts = {**report.counts(), "off_contract_trials": off}
            merge_update_record(s, inp.lineage_id, inp.generation, {"selection": counts})
        return result

    @activity.defn(name="record_iteration")
    async def record_iteration(self, inp: RecordIterationInput) -> None:
        """Insert or replace one iteration's record in ``update.iterations`` (ordered by index)."""

        def work() -> None:
            from mindforge.store import lineages

            with store_engine.session_scope(self.engine) as s:
                gen = lineages.get_generation(session=s, lineage_id=inp.lineage_id, index=inp.generation)
                update = dict(gen.record.get("update") or {}) if gen is not None else {}
                kept = [it for it in update.get("iterations", []) if it.get("iteration") != inp.record.iteration]
                rows = sorted([*kept, inp.record.model_dump(mode="json")], key=lambda it: it["iteration"])
                merge_update_record(s, inp.lineage_id, inp.generation, {"iterations": rows})

        await asyncio.to_thread(work)

    def all(self) -> list[Any]:
        """Every activity of this class (orchestration queue)."""
        return [self.plan_update, self.plan_rollout_trials, self.select_trajectories, self.record_iteration]


def same_harness(session, contract_hash: str, hashes: set[str]) -> set[str]:
    """The hashes among ``hashes`` (and ``contract_hash``) of registered contracts with ``contract_hash``'s harness.

    A rollout from an iteration's adapter runs under the training contract with
    ``model.adapter`` naming it: another hash, the same harness
    (:func:`mindforge.evaluation.on_contract.harness_key`).
    """
    from mindforge.hcp import loads_contract

    def key(h: str) -> str | None:
        row = registry.get_contract(session=session, content_hash=h) if h else None
        return harness_key(loads_contract(row.toml_text, source=f"contract {h}")) if row is not None else None

    want = key(contract_hash)
    return {contract_hash} | {h for h in hashes if h and h != contract_hash and want is not None and key(h) == want}


def training_guides(session, contract_hash: str, search: set[str]) -> dict[str, GuideRef]:
    """Search task hash -> its guide under the training contract (off-policy guidance).

    The guides are the task's own entries in the contract's experience snapshot that can
    guide under its harness (:func:`mindforge.trainer.guidance.guide_entries`), for tasks
    on the lineage's search split only (a snapshot holds search-split entries alone; the
    filter keeps it so). Empty when the contract carries no snapshot.

    Raises:
        ContractNotRegisteredError: the training contract is not registered.
    """
    from mindforge.hcp import loads_contract
    from mindforge.trainer.guidance import guide_entries, guide_ref

    row = registry.require_contract(session=session, content_hash=contract_hash)
    contract = loads_contract(row.toml_text, source=f"contract {contract_hash}")
    snapshot = contract.resources.experience.snapshot if contract.resources.experience is not None else ""
    return {h: guide_ref(e, snapshot) for h, e in guide_entries(contract).items() if h in search}


def _rollout_contract(session, contract_hash: str, adapter: str) -> str:
    """The contract rollouts from ``adapter`` run under: the training contract naming it (registered here).

    A training contract that names ``adapter`` already (from generation 1 on, the parent
    pair's contract, whose adapter the first iteration draws from) is that contract.

    Raises:
        ContractNotRegisteredError: the training contract is not registered.
    """
    if not adapter:
        return contract_hash
    from mindforge.hcp import loads_contract

    row = registry.require_contract(session=session, content_hash=contract_hash)
    training = loads_contract(row.toml_text, source=f"contract {contract_hash}")
    if training.model.adapter == adapter:
        return contract_hash
    derived = successor_contract(training, adapter)
    registry.register_hcp_contract(session=session, contract=derived)
    return derived.content_hash


def _search_hashes(session, lineage_id: str) -> set[str]:
    return {t.id for t in pool.list_pool_tasks(session=session, lineage_id=lineage_id, split=PoolSplit.SEARCH)}


def _draw_groups(session, draws: list[list[str]]) -> list[tuple[str, list[float]]]:
    """(task hash, real rewards) of every (task, draw) group of the earlier draws."""
    out: list[tuple[str, list[float]]] = []
    for ids in draws:
        records = [r.to_record() for i in ids if (r := trials.get_trial(session=session, trial_id=i))]
        out.extend(curriculum.group_rewards(records).items())
    return out
