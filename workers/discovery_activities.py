"""Discovery activities: propose (policy call), check each proposal on Ray, admit to the pool.

The batch and the verdicts travel through the workflow as small JSON records (paths,
reasons, hashes); task files stay in the staging area under the artifact root until
admission moves them to ``<artifacts>/discovered/<lineage>/<task_id>``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mindforge.discovery.records import ProposalBatch, ProposalVerdict
from mindforge.evaluation import PoolSplit, admission_config
from mindforge.payloads import (
    AdmitInput,
    CheckProposalInput,
    CurriculumSpec,
    DiscoveryInput,
    DiscoveryResult,
    TrialStage,
)
from mindforge.payloads.ray_tasks import CheckProposalTaskInput, SandboxSettings
from mindforge.settings import Settings, get_settings
from mindforge.store import engine as store_engine
from mindforge.store import lineages, pool, registry, trials
from mindforge.store.errors import ContractNotRegisteredError, StoreError
from mindforge.store.models import TaskSource
from workers.sealed_labels import refresh_labels


def _pool_tasks(session, lineage_id: str, split: PoolSplit | None = None):
    from mindforge.tasks.loader import load_task

    return [load_task(Path(t.path)) for t in pool.list_pool_tasks(session=session, lineage_id=lineage_id, split=split)]


def _discovered_in(session, lineage_id: str, generation: int) -> set[str]:
    """Content hashes of the discovered tasks that joined the pool in ``generation``.

    Raises:
        StoreError: a pool entry names no registered task (the store is inconsistent).
    """
    out = set()
    for entry in pool.list_pool(session=session, lineage_id=lineage_id):
        if entry.added_generation != generation:
            continue
        task = pool.get_task(session=session, content_hash=entry.task_hash)
        if task is None:
            raise StoreError(f"pool entry {entry.task_hash} of lineage {lineage_id} names no registered task")
        if task.source == TaskSource.DISCOVERED:
            out.add(entry.task_hash)
    return out


def _curriculum_of(session, lineage_id: str) -> CurriculumSpec | None:
    """The lineage's curriculum (its stored spec's), or None when its pool is tasks only."""
    lin = lineages.get_lineage(session=session, lineage_id=lineage_id)
    stored = (lin.spec or {}).get("curriculum") if lin is not None else None
    return CurriculumSpec.model_validate(stored) if stored else None


class DiscoveryActivities:
    """Activities bound to one store (the same database as the lineage activities).

    Args:
        engine: a SQLAlchemy engine of the migrated store.
        artifact_root: where staging and admitted tasks live (and the checks' trials).
        settings: the worker's settings; their Docker settings travel in each check's Ray
            task input (default :func:`mindforge.settings.get_settings`).
    """

    def __init__(self, engine, artifact_root: Path, settings: Settings | None = None) -> None:
        self.engine = engine
        self.artifact_root = Path(artifact_root)
        sandbox = SandboxSettings.from_settings(settings or get_settings())
        self.sandbox = sandbox.model_copy(update={"artifact_root": str(self.artifact_root)})

    @activity.defn(name="propose_tasks")
    async def propose(self, inp: DiscoveryInput) -> ProposalBatch:
        """Ask the current pair for ``discovery.count`` tasks; stage the well-formed ones.

        Returns:
            the batch: staged paths and malformed rejections.

        Raises:
            ApplicationError: retryable when the endpoint did not answer; non-retryable
                (``ContractNotRegisteredError``) when the contract is not registered.
        """
        try:
            return await asyncio.to_thread(self._propose, inp)
        except ContractNotRegisteredError as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc

    def _propose(self, inp: DiscoveryInput) -> ProposalBatch:
        from mindforge.discovery.proposal import summarise_pool
        from mindforge.discovery.run import DiscoveryConfig, propose_batch
        from mindforge.hcp import loads_contract

        with store_engine.session_scope(self.engine) as s:
            contract = loads_contract(registry.require_contract(session=s, content_hash=inp.contract_hash).toml_text)
            # the proposer sees the search split only: selection and sealed tasks stay out of its prompt
            tasks = _pool_tasks(s, inp.lineage_id, PoolSplit.SEARCH)
            # ids of every split, to name new tasks apart from them; never put in the prompt
            taken = {t.task_id for t in pool.list_pool_tasks(session=s, lineage_id=inp.lineage_id)}
            solved: set[str] = set()
            failed: set[str] = set()
            classes: dict[str, int] = {}
            if inp.generation > 0:
                for r in trials.list_trials(
                    session=s, lineage_id=inp.lineage_id, generation_index=inp.generation - 1,
                    stage=TrialStage.EXPANSION.value,
                ):
                    (solved if r.reward is not None and r.reward >= 1.0 else failed).add(r.task_id)
                    if r.failure_class:
                        classes[str(r.failure_class)] = classes.get(str(r.failure_class), 0) + 1
            curriculum = _curriculum_of(s, inp.lineage_id)
        # a lineage with a curriculum proposes instances of its training families only: held-out ones stay unseen
        config = DiscoveryConfig(
            count=inp.discovery.count, generation=inp.generation, attempts=inp.discovery.attempts,
            families_dir=curriculum.families_dir if curriculum else None,
            families=tuple(curriculum.training_families) if curriculum else None,
        )
        staging = self.artifact_root / "staging" / inp.lineage_id / f"g{inp.generation}"
        batch = propose_batch(
            contract,
            summarise_pool(tasks, solved=solved, failed=failed, failure_classes=classes),
            staging_dir=staging,
            config=config,
            taken_ids=taken,
            client=inp.runtime.policy_url,
            run_id=f"{inp.lineage_id}/g{inp.generation}/discovery",
        )
        return batch

    @activity.defn(name="check_proposal")
    async def check(self, inp: CheckProposalInput) -> ProposalVerdict:
        """Check one staged proposal on Ray: static checks, validation, difficulty estimate.

        Returns:
            the verdict.

        Raises:
            ApplicationError: non-retryable (``ContractNotRegisteredError``) when the contract
                is not registered.
        """
        import ray

        from workers.ray_trials import check_proposal_task

        with store_engine.session_scope(self.engine) as s:
            try:
                toml_text = registry.require_contract(session=s, content_hash=inp.contract_hash).toml_text
            except ContractNotRegisteredError as exc:
                raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc
            # THE ONE ALLOWED READ of sealed (and selection) task contents outside measurement:
            # the near-duplicate check compares a proposal's instruction and tests with every
            # pool task's, so that a copy of a sealed task cannot enter the pool (on the search
            # split it would leak the sealed task into search and training). The check only
            # rejects; nothing it reads reaches a prompt, a record or a decision
            # (docs/architecture.md, section 2; tests/e2e/test_evidence_leak.py).
            members = {m.task_hash: m.split for m in pool.list_pool(session=s, lineage_id=inp.lineage_id)}
            pool_tasks = pool.list_pool_tasks(session=s, lineage_id=inp.lineage_id)
            pool_paths = [t.path for t in pool_tasks]
            held_out = [t.task_id for t in pool_tasks if members.get(t.id) != PoolSplit.SEARCH]
        ref = check_proposal_task.remote(
            CheckProposalTaskInput(
                task_dir=inp.task_dir,
                pool_paths=pool_paths,
                held_out_ids=held_out,
                contract_toml=toml_text,
                policy_url=inp.policy_url,
                attempts=inp.attempts,
                run_id=f"{inp.lineage_id}/g{inp.generation}/discovery",
                sandbox=self.sandbox,
            )
        )
        try:
            while True:
                activity.heartbeat()
                ready, _ = await asyncio.to_thread(ray.wait, [ref], num_returns=1, timeout=2.0)
                if ready:
                    return ray.get(ref)
        except asyncio.CancelledError:
            ray.cancel(ref)
            raise

    @activity.defn(name="admit_tasks")
    async def admit(self, inp: AdmitInput) -> DiscoveryResult:
        """Decide admission, move admitted tasks out of staging and add them to the pool.

        The generation's record gets ``discovery``: proposals, admissions (with split,
        difficulty and provenance) and rejections with reasons. When tasks were admitted,
        the sealed readings' labels are checked again in the same transaction
        (:func:`workers.sealed_labels.refresh_labels`: an admission that restates a sealed
        instance's answer makes it copyable).
        """
        return await asyncio.to_thread(self._admit, inp)

    def _admit(self, inp: AdmitInput) -> DiscoveryResult:
        from mindforge.discovery.admission import discovered_dir
        from mindforge.discovery.run import DiscoveryConfig, admission_record
        from mindforge.store.discovered import admit_to_store

        batch = inp.batch.model_copy(deep=True)
        # a retry after admission moved some tasks out of staging reads them where they are now
        for staged in batch.staged:
            moved = discovered_dir(self.artifact_root, inp.lineage_id, staged.task_id)
            if not Path(staged.path).exists() and moved.exists():
                staged.path = str(moved)
        verdicts = inp.verdicts
        with store_engine.session_scope(self.engine) as s:
            # tasks this Discovery already admitted (a retried activity), not the lineage's starting pool
            new = _discovered_in(s, inp.lineage_id, inp.generation)
            config = DiscoveryConfig(
                count=max(1, batch.requested),
                generation=inp.generation,
                splits=admission_config(inp.evaluation.splits),  # the sealed split is frozen
                split_key=inp.lineage_id,
                # counts before this generation's admissions, so a retried activity decides the same splits
                existing=pool.category_split_counts(session=s, lineage_id=inp.lineage_id, exclude=new),
            )
            record = admission_record(batch, verdicts, config)
            admitted = admit_to_store(
                s, inp.lineage_id, inp.generation, record.admitted, artifact_root=self.artifact_root
            )
            record = record.model_copy(update={"admitted": admitted})
            lineages.update_generation(
                session=s, lineage_id=inp.lineage_id, index=inp.generation,
                record={"discovery": record.model_dump(mode="json")},
            )
            if admitted:  # an admitted task's reference solution may be a sealed instance's answer
                refresh_labels(s, inp.lineage_id, f"generation {inp.generation}: Discovery admission")
        return DiscoveryResult(
            requested=record.requested, proposed=record.proposed, admitted=len(record.admitted),
            rejected=len(record.rejected),
        )

    def all(self) -> list[Any]:
        """Every activity of this class, for worker registration."""
        return [self.propose, self.check, self.admit]
