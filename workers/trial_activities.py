"""Running planned trials: the ``run_trials`` activity every stage uses, on the sandbox queue.

Each stage plans its trials (ids, tasks, the pair) on the orchestration queue and hands
the batches to ``run_trials``. It submits one Ray task per trial that has no stored
record yet (:func:`run_trial_ref` -> :func:`workers.ray_trials.run_trial_task`),
heartbeats while it waits, and stores each record as it arrives, so a retried activity
(after a worker crash) never runs or counts a finished trial twice. Bad input raises
non-retryable ``ApplicationError``s.

A trial that an infrastructure fault ends (the sandbox engine, the policy endpoint, or
its Ray worker died: :data:`~mindforge.trials.record.RETRYABLE_INFRA_CLASSES`) is not
stored as a trial: the activity stores it as an infrastructure attempt
(:mod:`mindforge.store.infra_attempts`), finishes the batch, then fails with the
retryable ``TrialsInfraError``, and Temporal's retry policy (``TRIALS_RETRY``, with
backoff) runs the faulted trials again. From attempt :data:`INFRA_RERUNS` on, a faulted
trial is stored as it is, with no reward, so a fault that outlasts the reruns leaves
the trial out of every score instead of blocking the lineage.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mindforge.evaluation import StageSplitError
from mindforge.payloads import RunTrialsInput, RunTrialsResult, TrialSpec
from mindforge.payloads.ray_tasks import RunTrialTaskInput, RunTrialTaskResult, SandboxSettings
from mindforge.settings import Settings, get_settings
from mindforge.store import engine as store_engine
from mindforge.store import infra_attempts, pool, registry, trials
from mindforge.store.errors import ContractNotRegisteredError
from mindforge.trials.record import FailureClass, TrialRecord, is_retryable_infra
from mindforge.trials.seeds import paired_seed

#: the activity attempt from which a faulted trial is stored as it is (no reward) rather
#: than run again; attempts 1..5 back off 2+4+8+16+32 s under ``TRIALS_RETRY``, which
#: covers a policy server or Docker engine restart (seconds) with room to spare
INFRA_RERUNS = 6

#: the ``ApplicationError`` type of a batch some of whose trials met a fault (retryable)
TRIALS_INFRA_ERROR = "TrialsInfraError"


def _non_retryable(exc: Exception) -> ApplicationError:
    return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True)


class TrialActivities:
    """The trial fan-out, bound to one store and the worker's sandbox settings.

    Args:
        engine: SQLAlchemy engine of the migrated store.
        settings: the worker's settings; their artifact root and Docker settings travel
            in every trial's Ray task input (default :func:`mindforge.settings.get_settings`).
    """

    def __init__(self, engine, settings: Settings | None = None) -> None:
        self.engine = engine
        settings = settings or get_settings()
        self.sandbox = SandboxSettings.from_settings(settings)
        self.trial_cpus = settings.trial_cpus

    @activity.defn(name="run_trials")
    async def run_trials(self, inp: RunTrialsInput) -> RunTrialsResult:
        """Run the batch's trials on Ray; store each record as it arrives.

        Trials whose id is already stored are skipped (a retry after a crash). Heartbeats
        carry the number of trials done. On cancellation or failure the pending Ray tasks
        are cancelled (their sandboxes are removed by the runner, or reaped on the next
        engine start), so no trial of a failed attempt runs beside its retry. A trial an
        infrastructure fault ended, its Ray node or worker lost included, is stored as an
        infrastructure attempt and run again by Temporal's retry (see the module docstring).

        Raises:
            ApplicationError: non-retryable when the contract is not registered
                (``ContractNotRegisteredError``), or (``StageSplitError``) when a trial's
                task is on another split than the batch's stage allows
                (:func:`mindforge.evaluation.split_of_stage`).
        """
        import ray

        try:
            todo, skipped, toml_text = await asyncio.to_thread(self._todo, inp)
        except (StageSplitError, ContractNotRegisteredError) as exc:
            raise _non_retryable(exc) from exc
        if todo:
            await asyncio.to_thread(self._ensure_adapter_served, inp, toml_text)
        if todo and activity.info().attempt > 1:  # sandboxes an earlier attempt's fault left behind
            await asyncio.to_thread(self._clean_up, {t.trial_id for t in todo}, strict=True)
        payloads = [self._payload(inp, t, toml_text, self.sandbox) for t in todo]
        refs = [run_trial_ref(p, self.trial_cpus) for p in payloads]
        by_ref = {ref: (payload, spec.task_hash) for ref, payload, spec in zip(refs, payloads, todo, strict=True)}
        attempt = activity.info().attempt
        store_faults_as_trials = attempt >= INFRA_RERUNS
        ran = passed = errors = 0
        faulted: list[TrialRecord] = []
        pending = list(refs)
        try:
            while pending:
                activity.heartbeat({"done": ran, "pending": len(pending), "faulted": len(faulted)})
                ready, pending = await asyncio.to_thread(ray.wait, pending, num_returns=1, timeout=2.0)
                for ref in ready:
                    rec = await asyncio.to_thread(_record_of, ref, *by_ref[ref])
                    if is_retryable_infra(rec) and not store_faults_as_trials:
                        await asyncio.to_thread(self._store_fault, inp, rec, attempt)
                        faulted.append(rec)
                        continue
                    await asyncio.to_thread(self._store, inp, rec)
                    ran += 1
                    passed += int(rec.passed)
                    errors += int(not rec.has_real_reward)
        except BaseException:
            # cancelled, or a failure the retry will rerun: no trial of this attempt keeps running behind it
            for ref in pending:
                ray.cancel(ref)
            raise
        if faulted:
            await asyncio.to_thread(self._clean_up, {r.trial_id for r in faulted}, strict=False)
            classes = sorted({str(r.failure_class) for r in faulted})
            raise ApplicationError(
                f"{len(faulted)} of {len(todo)} trials met an infrastructure fault ({', '.join(classes)}; first: "
                f"{faulted[0].failure_detail[:300]}); stored {ran}, the faulted ones run again",
                {"faulted": [r.trial_id for r in faulted]},
                type=TRIALS_INFRA_ERROR,
            )
        return RunTrialsResult(ran=ran, skipped_existing=skipped, passed=passed, errors=errors)

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

    def _ensure_adapter_served(self, inp: RunTrialsInput, toml_text: str) -> None:
        """Check the endpoint answers, and load the pair's adapter into it unless it serves it.

        A policy server that restarted (a crash, an out-of-memory kill, a redeploy) comes
        back with its base model only; the pair's trials would then ask for an adapter it
        does not have. Every attempt of every batch therefore asks ``/v1/models`` first (no
        sandbox starts while the endpoint is down) and loads a missing adapter by the
        registry's name and path (:func:`mindforge.policy.handoff.load_adapter`). An
        Update iteration's adapter (handed off, not registered) is found where the training
        activity wrote it; adapters neither knows (served by the user's own endpoint) are
        left to that endpoint.

        Raises:
            ApplicationError: retryable when the endpoint does not answer (it may be
                restarting); non-retryable when it refuses the name or the adapter.
        """
        from mindforge.hcp.io import loads_contract
        from mindforge.policy.handoff import EndpointUnavailableError, ServingError, load_adapter, served_adapters

        if not inp.policy_url:
            return
        name = loads_contract(toml_text).model.adapter
        secret = self.sandbox.policy_api_key  # the key the trials send, for the same endpoint
        key = secret.get_secret_value() if secret is not None else None
        try:
            served = served_adapters(inp.policy_url, api_key=key)
            if not name or name in served:  # served under any path: the hand-off's word stands
                return
            path = self._adapter_path(inp.lineage_id, name)
            if path is not None:
                load_adapter(inp.policy_url, name, path, api_key=key)
        except EndpointUnavailableError as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__) from exc
        except ServingError as exc:
            raise _non_retryable(exc) from exc

    def _adapter_path(self, lineage_id: str, name: str) -> str | None:
        """Where the adapter ``name`` lies: the registry's path, or an Update iteration's directory."""
        from workers.ray_trials import TRAIN_RECORD

        with store_engine.session_scope(self.engine) as s:
            row = registry.get_adapter_by_name(session=s, name=name)
            if row is not None:
                return row.path
        trained = Path(self.sandbox.artifact_root) / "adapters" / lineage_id / name
        return str(trained) if (trained / TRAIN_RECORD).is_file() else None

    def _clean_up(self, trial_ids: set[str], *, strict: bool) -> None:
        """Remove the sandboxes of these trials and this host's orphans.

        A Ray worker that died left its sandbox with no owner process (the engine's orphan
        clean-up, by owner pid and start time, finds it); an engine restart stopped a
        sandbox whose owner lives on (found by its trial label).

        Raises:
            ApplicationError: retryable, when ``strict`` and the engine does not answer
                (a sandbox of a trial about to run again must not outlive it).
        """
        from mindforge.errors import InfraError
        from mindforge.sandbox.docker import DockerEngine

        try:
            engine = DockerEngine.from_settings(self.sandbox.to_settings(), reap=False)
            engine.reap_orphans()
            engine.remove_trial_sandboxes(trial_ids)
        except InfraError as exc:
            if strict:
                raise ApplicationError(f"sandbox clean-up before a rerun failed: {exc}", type="InfraError") from exc
            activity.logger.warning("sandbox clean-up skipped until the next attempt: %s", exc)

    def _store_fault(self, inp: RunTrialsInput, rec: TrialRecord, attempt: int) -> None:
        with store_engine.session_scope(self.engine) as s:
            infra_attempts.record_infra_attempt(
                session=s, record=rec, lineage_id=inp.lineage_id, generation_index=inp.generation,
                stage=inp.stage.value, activity_attempt=attempt,
            )

    def all(self) -> list[Any]:
        """Every activity of this class (all on the sandbox queue)."""
        return [self.run_trials]


def run_trial_ref(payload: RunTrialTaskInput, cpus: float = 1.0, sandboxes: float | None = None) -> Any:
    """Submit one trial to Ray, asking for ``cpus`` Ray CPUs (settings' ``trial_cpus``); returns its ObjectRef.

    It asks for ``sandboxes`` units of the custom resource ``sandbox`` too (default
    settings' ``trial_sandboxes``; 0 asks for none, as a Ray without that resource needs),
    so on a cluster whose sandbox nodes declare it a trial lands only on one of them.
    """
    from workers.ray_trials import run_trial_task

    if sandboxes is None:
        sandboxes = get_settings().trial_sandboxes
    resources = {"sandbox": sandboxes} if sandboxes else None
    return run_trial_task.options(num_cpus=cpus, resources=resources).remote(payload)


def _record_of(ref: Any, payload: RunTrialTaskInput, task_hash: str) -> TrialRecord:
    """The trial's record; a Ray task that died with its worker becomes an infrastructure fault.

    Ray raises ``RayError`` subclasses from ``ray.get`` when the task's worker process or
    node died (``WorkerCrashedError``, ``NodeDiedError``...) or the task raised; the trial
    then has no reward and runs again (its sandbox, if any, is reaped by the engine's
    orphan clean-up).
    """
    import ray
    from ray.exceptions import RayError

    try:
        out: RunTrialTaskResult = ray.get(ref)
        return out.record
    except RayError as exc:
        return TrialRecord(
            trial_id=payload.trial_id,
            run_id=payload.run_id,
            task_id=Path(payload.task_path).name,
            task_hash=task_hash,
            agent=payload.agent,
            contract_hash=payload.contract_hash,
            attempt=payload.attempt,
            reward=None,
            failure_class=FailureClass.INFRA_ERROR,
            failure_detail=f"the trial's Ray task was lost: {type(exc).__name__}: {str(exc)[:500]}",
        )
