"""Running planned trials: the ``run_trials`` activity every stage uses, on the sandbox queue.

Each stage plans its trials (ids, tasks, the pair) on the orchestration queue and hands
the batches to ``run_trials``. It submits one Ray task per trial that has no stored
record yet (:func:`run_trial_ref` -> :func:`workers.ray_trials.run_trial_task`),
heartbeats while it waits, and stores each record as it arrives, so a retried activity
(after a worker crash) never runs or counts a finished trial twice. Bad input raises
non-retryable ``ApplicationError``s.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mindforge.evaluation import StageSplitError
from mindforge.payloads import RunTrialsInput, RunTrialsResult, TrialSpec
from mindforge.payloads.ray_tasks import RunTrialTaskInput, RunTrialTaskResult, SandboxSettings
from mindforge.settings import Settings, get_settings
from mindforge.store import engine as store_engine
from mindforge.store import pool, registry, trials
from mindforge.store.errors import ContractNotRegisteredError
from mindforge.trials.record import TrialRecord
from mindforge.trials.seeds import paired_seed

#: resubmits one batch may make at least (else one per trial) before the activity fails and is retried
MIN_RESUBMITS = 4


def _non_retryable(exc: Exception) -> ApplicationError:
    return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True)


def _lost(exc: Exception, payload: RunTrialTaskInput) -> ApplicationError:
    """A retryable failure: the batch lost more Ray nodes or workers than it resubmits for."""
    return ApplicationError(f"trial {payload.trial_id}: Ray node lost again ({exc})", type="TrialNodeLost")


def _lost_node_errors() -> tuple[type[Exception], ...]:
    """Ray's errors for a trial whose node, raylet or worker process died (not an error the trial raised)."""
    import ray.exceptions as rex

    return (rex.WorkerCrashedError, rex.NodeDiedError, rex.ObjectLostError, rex.LocalRayletDiedError)


class TrialActivities:
    """The trial fan-out, bound to one store and the worker's sandbox settings.

    Args:
        engine: SQLAlchemy engine of the migrated store.
        settings: the worker's settings; their artifact root and Docker settings travel
            in every trial's Ray task input (default :func:`mindforge.settings.get_settings`).
    """

    def __init__(self, engine, settings: Settings | None = None) -> None:
        self.engine = engine
        self.sandbox = SandboxSettings.from_settings(settings or get_settings())

    @activity.defn(name="run_trials")
    async def run_trials(self, inp: RunTrialsInput) -> RunTrialsResult:
        """Run the batch's trials on Ray; store each record as it arrives.

        Trials whose id is already stored are skipped (a retry after a crash). A trial
        whose Ray node or worker process dies under it (a killed node container) is
        submitted again, to whichever node Ray picks; past ``max(MIN_RESUBMITS, trials)``
        such resubmits the activity fails retryably (``TrialNodeLost``) and Temporal's
        retry runs what is not stored. Heartbeats carry the number of trials done. On
        cancellation or failure the pending Ray tasks are cancelled (their sandboxes are
        removed by the runner, or reaped on the next engine start), so no trial of a
        failed attempt runs beside its retry.

        Raises:
            ApplicationError: retryable ``TrialNodeLost`` (above); non-retryable when
                the contract is not registered (``ContractNotRegisteredError``), or (``StageSplitError``) when a trial's
                task is on another split than the batch's stage allows
                (:func:`mindforge.evaluation.split_of_stage`).
        """
        import ray

        try:
            todo, skipped, toml_text = await asyncio.to_thread(self._todo, inp)
        except (StageSplitError, ContractNotRegisteredError) as exc:
            raise _non_retryable(exc) from exc
        submitted = [self._payload(inp, t, toml_text, self.sandbox) for t in todo]
        payloads = {run_trial_ref(p): p for p in submitted}
        ran = passed = errors = resubmitted = 0
        pending = list(payloads)
        try:
            while pending:
                activity.heartbeat({"done": ran, "pending": len(pending), "resubmitted": resubmitted})
                ready, pending = await asyncio.to_thread(ray.wait, pending, num_returns=1, timeout=2.0)
                for ref in ready:
                    try:
                        out: RunTrialTaskResult = ray.get(ref)
                    except _lost_node_errors() as exc:
                        payload = payloads.pop(ref)
                        if resubmitted >= max(MIN_RESUBMITS, len(todo)):
                            raise _lost(exc, payload) from exc
                        activity.logger.warning("trial %s lost its Ray node (%s); resubmitted", payload.trial_id, exc)
                        pending.append(new_ref := run_trial_ref(payload))
                        payloads[new_ref] = payload
                        resubmitted += 1
                        continue
                    rec = out.record
                    await asyncio.to_thread(self._store, inp, rec)
                    ran += 1
                    passed += int(rec.passed)
                    errors += int(not rec.has_real_reward)
        except BaseException:
            # cancelled, or a failure the retry will rerun: no trial of this attempt keeps running behind it
            for ref in pending:
                ray.cancel(ref)
            raise
        return RunTrialsResult(ran=ran, skipped_existing=skipped, passed=passed, errors=errors, resubmitted=resubmitted)

    def _todo(self, inp: RunTrialsInput) -> tuple[list[TrialSpec], int, str]:
        with store_engine.session_scope(self.engine) as s:
            contract = registry.require_contract(session=s, content_hash=inp.contract_hash)
            pool.check_trial_splits(
                session=s, lineage_id=inp.lineage_id, stage=inp.stage,
                trials=[(t.trial_id, t.task_hash) for t in inp.trials],
            )
            todo = [t for t in inp.trials if not trials.trial_exists(session=s, trial_id=t.trial_id)]
            return todo, len(inp.trials) - len(todo), contract.toml_text

    @staticmethod
    def _payload(inp: RunTrialsInput, t: TrialSpec, toml_text: str, sandbox: SandboxSettings) -> RunTrialTaskInput:
        """The Ray task's input; with ``paired_seeds`` its model calls carry the trial's common seed."""
        seed = (
            paired_seed(inp.lineage_id, inp.stage.value, t.task_hash, t.attempt, t.trial_id)
            if inp.paired_seeds else None
        )
        return RunTrialTaskInput(
            task_path=t.task_path,
            trial_id=t.trial_id,
            run_id=f"{inp.lineage_id}/g{inp.generation}/{inp.stage.value}",
            attempt=t.attempt,
            agent="model",
            contract_toml=toml_text,
            contract_hash=inp.contract_hash,
            policy_url=inp.policy_url,
            sandbox=sandbox,
            seed=seed,
        )

    def _store(self, inp: RunTrialsInput, rec: TrialRecord) -> None:
        with store_engine.session_scope(self.engine) as s:
            trials.insert_trial(
                session=s, record=rec, lineage_id=inp.lineage_id, generation_index=inp.generation, stage=inp.stage.value
            )

    def all(self) -> list[Any]:
        """Every activity of this class (all on the sandbox queue)."""
        return [self.run_trials]


def run_trial_ref(payload: RunTrialTaskInput) -> Any:
    """Submit one trial to Ray; returns its ObjectRef."""
    from workers.ray_trials import run_trial_task

    return run_trial_task.remote(payload)
