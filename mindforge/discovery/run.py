"""One Discovery run: propose, materialise, check, decide admission.

The run has three steps, each a function with small pydantic inputs and results, so a
workflow can run them as separate activities (checking proposals in parallel):

1. :func:`propose_batch` - ask the pair, write each well-formed proposal to the staging
   area under its generation-prefixed id; returns paths, not file contents.
2. :func:`~mindforge.discovery.admission.check_proposal` on each staged path.
3. :func:`admission_record` - turn the verdicts into the record: accepted proposals
   that duplicate an earlier accepted one of the same batch are rejected (so parallel
   checks cannot admit two copies), the rest get a split and provenance.

:func:`run_discovery` runs the three in-process (``mindforge tasks discover``); admitted
tasks stay in the staging area until :func:`~mindforge.discovery.admission.admit_to_store`
or :func:`~mindforge.discovery.materialise.move_task_dir` moves them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
from pydantic import BaseModel, ConfigDict, Field

from mindforge.agent.base import Agent
from mindforge.discovery.admission import (
    check_proposal,
    make_provenance,
    unique_task_id,
)
from mindforge.discovery.checks import SIMILARITY_THRESHOLD, PoolIndex
from mindforge.discovery.families import load_families
from mindforge.discovery.family_proposal import request_family_proposals
from mindforge.discovery.materialise import DiscoveredTaskLimits, materialise
from mindforge.discovery.proposal import PoolSummary, request_proposals
from mindforge.discovery.records import (
    AdmittedTask,
    DiscoveryRecord,
    PairInfo,
    ProposalBatch,
    ProposalVerdict,
    Rejection,
    StagedProposal,
)
from mindforge.discovery.schema import DEFAULT_RULES, ProposalRules
from mindforge.evaluation.splits import (
    PoolSplit,
    SplitCandidate,
    SplitConfig,
    admission_config,
    assign_splits,
)
from mindforge.sandbox.docker import DockerEngine
from mindforge.tasks.image_map import ImageMap
from mindforge.tasks.loader import load_task
from mindforge.trials.record import TrialRecord


class DiscoveryConfig(BaseModel):
    """Knobs of one Discovery run.

    Attributes:
        count: proposals asked for (K).
        generation: the generation running Discovery (ids are ``g<generation>-...``).
        attempts: trials of the current pair per valid proposal (difficulty estimate).
        oracle_runs: reference-solution runs in validation.
        splits: the lineage's split fractions (and pinned tasks).
        split_key: the lineage id (admitted tasks are ordered by a hash of it and their
            content hash, as the starting pool was).
        existing: category -> split -> tasks already in the pool (before this run's
            admissions), so the pool stays at the fractions within each category.
        similarity_threshold: near-duplicate threshold for instructions.
        max_tokens: completion limit of the proposal call, tokens (None = the contract's).
        rules: base images and size limits of proposals.
        limits: limits written into each task's ``task.toml``.
        families_dir: the task families a ``families``-mode contract proposes from
            (default the bundled ``tasks/families``).
        families: the names among them it may propose from (None: all); a lineage with a
            curriculum lists its training families, so a held-out family never reaches
            Discovery.
    """

    model_config = ConfigDict(frozen=True)

    count: int = Field(ge=1)
    generation: int = Field(default=1, ge=0)
    attempts: int = Field(default=2, ge=1)
    oracle_runs: int = Field(default=2, ge=2)
    splits: SplitConfig = Field(default_factory=lambda: SplitConfig(selection_fraction=0.0, sealed_fraction=0.0))
    split_key: str = ""
    existing: dict[str, dict[PoolSplit, int]] = Field(default_factory=dict)
    similarity_threshold: float = Field(default=SIMILARITY_THRESHOLD, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, gt=0)
    rules: ProposalRules = DEFAULT_RULES
    limits: DiscoveredTaskLimits = Field(default_factory=DiscoveredTaskLimits)
    families_dir: str | None = None
    families: tuple[str, ...] | None = None


def propose_batch(
    contract: Any,
    summary: PoolSummary,
    *,
    staging_dir: Path,
    config: DiscoveryConfig,
    taken_ids: set[str],
    client: openai.OpenAI | str | None = None,
    run_id: str | None = None,
) -> ProposalBatch:
    """Ask the current pair for ``config.count`` tasks and stage the well-formed ones.

    Args:
        contract: the current pair's HCP contract.
        summary: what the model is told about the pool.
        staging_dir: where task directories go (``reply.json`` holds the raw reply).
        config: the run's knobs.
        taken_ids: task ids already in the pool (new ids avoid them).
        client: an ``openai.OpenAI`` client or base URL (default: from the contract).
        run_id: the run id (default ``discovery-<hex>``).

    Returns:
        The batch: staged proposals (paths) and malformed ones with reasons.

    Raises:
        DiscoveryEndpointError: the policy endpoint did not answer.
    """
    run_id = run_id or f"discovery-{uuid.uuid4().hex[:8]}"
    staging_dir = Path(staging_dir)
    if contract.prompts.discovery_mode == "families":
        families = load_families(Path(config.families_dir) if config.families_dir else None)
        if config.families is not None:
            families = {name: f for name, f in families.items() if name in set(config.families)}
        outcomes = request_family_proposals(
            client, contract, summary, config.count, families, max_tokens=config.max_tokens,
            reply_path=staging_dir / "reply.json",
        )
    else:
        outcomes = request_proposals(
            client, contract, summary, config.count, rules=config.rules, max_tokens=config.max_tokens,
            reply_path=staging_dir / "reply.json",
        )
    batch = ProposalBatch(
        run_id=run_id,
        generation=config.generation,
        pair=PairInfo.from_contract(contract),
        requested=config.count,
        proposed=sum(o.index >= 0 for o in outcomes),
    )
    taken = set(taken_ids)
    for outcome in outcomes:
        prop = outcome.proposal
        if prop is None:
            batch.rejected.append(outcome.rejection())
            continue
        task_id = unique_task_id(prop.task_id, config.generation, taken)
        taken.add(task_id)
        extra = {"family": outcome.family, "family_params": outcome.params} if outcome.family else None
        path = materialise(prop, staging_dir, task_id=task_id, limits=config.limits, metadata=extra)
        batch.staged.append(
            StagedProposal(
                task_id=task_id, proposed_id=prop.task_id, path=str(path), category=prop.category,
                declared_difficulty=prop.difficulty, family=outcome.family, params=outcome.params,
            )
        )
    return batch


def admission_record(batch: ProposalBatch, verdicts: list[ProposalVerdict], config: DiscoveryConfig) -> DiscoveryRecord:
    """Decide admission from the checks' verdicts: dedupe within the batch, assign splits, add provenance.

    Args:
        batch: the staged proposals.
        verdicts: one verdict per staged proposal (matched by ``task_id``; a staged
            proposal without a verdict is an error).
        config: the run's knobs (splits, split key, existing pool counts, threshold);
            the sealed fraction is ignored: admitted tasks never join the sealed split.

    Returns:
        The record; admitted tasks keep their staging paths.

    Raises:
        ValueError: a staged proposal has no verdict.
    """
    by_id = {v.task_id: v for v in verdicts}
    record = DiscoveryRecord(
        run_id=batch.run_id, generation=batch.generation, pair=batch.pair, requested=batch.requested,
        proposed=batch.proposed, rejected=list(batch.rejected),
    )
    accepted: list[tuple[StagedProposal, ProposalVerdict, str]] = []
    seen = PoolIndex()
    for staged in batch.staged:
        verdict = by_id.get(staged.task_id)
        if verdict is None:
            raise ValueError(f"no verdict for staged proposal {staged.task_id!r}")
        if verdict.reason is None:
            task = load_task(Path(staged.path))
            duplicate = seen.find_duplicate(task, config.similarity_threshold)
            if duplicate is not None:
                verdict = verdict.model_copy(update={"reason": duplicate.reason, "detail": duplicate.detail})
            else:
                seen.add(task)
        if verdict.reason is not None:
            record.rejected.append(Rejection(task_id=staged.proposed_id, reason=verdict.reason, detail=verdict.detail))
            continue
        accepted.append((staged, verdict, task.config.metadata.category))
    # admitted tasks go to search (and selection), never to the sealed split: the sealed split is frozen
    # at lineage start, so the reported lift is measured on tasks no generation's Discovery chose
    unsealed = admission_config(config.splits)
    splits = assign_splits(
        [SplitCandidate(task_hash=v.content_hash, task_id=st.task_id, category=cat) for st, v, cat in accepted],
        unsealed,
        split_key=config.split_key,
        existing=config.existing,
    )
    for staged, verdict, _category in accepted:
        provenance = make_provenance(
            verdict, proposed_id=staged.proposed_id, pair=batch.pair, generation=batch.generation, run_id=batch.run_id
        )
        if staged.family:
            provenance["family"] = {"name": staged.family, "params": staged.params}
        record.admitted.append(
            AdmittedTask(
                task_id=staged.task_id, proposed_id=staged.proposed_id, path=staged.path,
                content_hash=verdict.content_hash, category=staged.category,
                declared_difficulty=staged.declared_difficulty, split=splits[verdict.content_hash],
                difficulty=verdict.difficulty, provenance=provenance,
            )
        )
    return record


def run_discovery(
    contract: Any,
    summary: PoolSummary,
    pool_index: PoolIndex,
    *,
    engine: DockerEngine,
    image_map: ImageMap | None,
    artifact_root: Path,
    staging_dir: Path,
    config: DiscoveryConfig,
    client: openai.OpenAI | str | None = None,
    make_agent: Callable[[], Agent] | None = None,
    run_id: str | None = None,
    on_trial: Callable[[TrialRecord], None] | None = None,
    on_verdict: Callable[[ProposalVerdict], None] | None = None,
) -> DiscoveryRecord:
    """Propose, check one proposal after the other, and decide admission, in-process.

    Each accepted proposal joins ``pool_index`` at once, so a later near-copy in the same
    reply is rejected before it is built.

    Args:
        contract: the current pair's HCP contract.
        summary: what the model is told about the pool.
        pool_index: the pool for the duplicate checks (gains the admitted tasks).
        engine: Docker engine wrapper.
        image_map: public-base rewrite map, or None.
        artifact_root: where trial artifacts go.
        staging_dir: where proposals are written.
        config: the run's knobs.
        client: an ``openai.OpenAI`` client or base URL (default: from the contract).
        make_agent: the current pair's agent for the difficulty estimate (default a
            ``ModelAgent`` on the same contract and endpoint).
        run_id: the run id (default ``discovery-<hex>``).
        on_trial / on_verdict: progress callbacks.

    Returns:
        The record: counts, admitted tasks (staging paths, split, difficulty,
        provenance) and rejections with reasons.

    Raises:
        DiscoveryEndpointError: the policy endpoint did not answer the proposal request.
    """
    batch = propose_batch(
        contract, summary, staging_dir=staging_dir, config=config, taken_ids=pool_index.ids(), client=client,
        run_id=run_id,
    )
    if make_agent is None:
        make_agent = _model_agent_factory(contract, client)
    verdicts = []
    for staged in batch.staged:
        verdict = check_proposal(
            Path(staged.path),
            pool_index,
            engine,
            image_map,
            artifact_root,
            make_agent=make_agent,
            attempts=config.attempts,
            oracle_runs=config.oracle_runs,
            run_id=batch.run_id,
            threshold=config.similarity_threshold,
            on_trial=on_trial,
        )
        if verdict.accepted:
            pool_index.add(load_task(Path(staged.path)))
        if on_verdict:
            on_verdict(verdict)
        verdicts.append(verdict)
    return admission_record(batch, verdicts, config)


def _model_agent_factory(contract: Any, client: openai.OpenAI | str | None) -> Callable[[], Agent]:
    from mindforge.agent.loop import ModelAgent

    base_url = str(client.base_url) if isinstance(client, openai.OpenAI) else client
    return lambda: ModelAgent(contract, base_url=base_url)
