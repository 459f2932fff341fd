"""One Discovery run in-process: propose, materialise, check, admit (no Temporal, no Ray).

``mindforge tasks discover`` uses :func:`run_discovery` directly; the lineage's
Discovery workflow runs the same steps as separate activities (propose, check each
proposal, admit). Proposals are checked one after the other, and each accepted one
joins the pool index at once, so that two near-identical proposals of one reply are
not both admitted.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
from pydantic import BaseModel, ConfigDict, Field

from mindforge.agent.base import Agent
from mindforge.discovery.admission import assign_splits, check_proposal, make_provenance, unique_task_id
from mindforge.discovery.checks import SIMILARITY_THRESHOLD, PoolIndex
from mindforge.discovery.materialise import DiscoveredTaskLimits, materialise
from mindforge.discovery.proposal import PoolSummary, request_proposals
from mindforge.discovery.records import AdmittedTask, DiscoveryRecord, PairInfo, ProposalVerdict, Rejection
from mindforge.discovery.schema import DEFAULT_RULES, ProposalRules, TaskProposal
from mindforge.sandbox.docker import DockerEngine
from mindforge.tasks.image_map import ImageMap
from mindforge.tasks.loader import load_task
from mindforge.trial import TrialRecord


class DiscoveryConfig(BaseModel):
    """Knobs of one Discovery run.

    Attributes:
        count: proposals asked for (K).
        generation: the generation running Discovery (ids are ``g<generation>-...``).
        attempts: trials of the current pair per accepted proposal (difficulty estimate).
        oracle_runs: reference-solution runs in validation.
        held_out_fraction / seed: the lineage's held-out share and split seed.
        pool_total / pool_held_out: tasks already in the pool, all and held out.
        similarity_threshold: near-duplicate threshold for instructions.
        max_tokens: completion limit of the proposal call, tokens (None = the contract's).
        rules: base images and size limits of proposals.
        limits: limits written into each task's ``task.toml``.
    """

    model_config = ConfigDict(frozen=True)

    count: int = Field(ge=1)
    generation: int = Field(default=1, ge=0)
    attempts: int = Field(default=2, ge=1)
    oracle_runs: int = Field(default=2, ge=2)
    held_out_fraction: float = Field(default=0.0, ge=0.0, lt=1.0)
    seed: int = 0
    pool_total: int = Field(default=0, ge=0)
    pool_held_out: int = Field(default=0, ge=0)
    similarity_threshold: float = Field(default=SIMILARITY_THRESHOLD, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, gt=0)
    rules: ProposalRules = DEFAULT_RULES
    limits: DiscoveredTaskLimits = Field(default_factory=DiscoveredTaskLimits)


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
    """Propose ``config.count`` tasks with the current pair, check each, and decide admission.

    Admitted tasks stay in ``staging_dir`` (their ``path``); move them with
    :func:`~mindforge.discovery.admission.admit_to_store` or
    :func:`~mindforge.discovery.materialise.move_task_dir`. ``pool_index`` gains the
    admitted tasks.

    Args:
        contract: the current pair's HCP contract.
        summary: what the model is told about the pool.
        pool_index: the pool for the duplicate checks.
        engine: Docker engine wrapper.
        image_map: public-base rewrite map, or None.
        artifact_root: where trial artifacts go.
        staging_dir: where proposals are written (``reply.json`` holds the raw reply).
        config: the run's knobs.
        client: an ``openai.OpenAI`` client or base URL (default: from the contract).
        make_agent: the current pair's agent for the difficulty estimate (default a
            ``ModelAgent`` on the same contract and endpoint).
        run_id: the run id (default ``discovery-<hex>``).
        on_trial / on_verdict: progress callbacks.

    Returns:
        The record: counts, admitted tasks (with split, difficulty, provenance) and
        rejections with reasons.

    Raises:
        DiscoveryEndpointError: the policy endpoint did not answer the proposal request.
    """
    run_id = run_id or f"discovery-{uuid.uuid4().hex[:8]}"
    staging_dir = Path(staging_dir)
    if make_agent is None:
        make_agent = _model_agent_factory(contract, client)
    outcomes = request_proposals(
        client, contract, summary, config.count, rules=config.rules, max_tokens=config.max_tokens, reply_path=staging_dir / "reply.json"
    )
    pair = PairInfo.from_contract(contract)
    record = DiscoveryRecord(
        run_id=run_id, generation=config.generation, pair=pair, requested=config.count, proposed=sum(o.index >= 0 for o in outcomes)
    )
    accepted: list[tuple[TaskProposal, ProposalVerdict]] = []
    taken = pool_index.ids()
    for outcome in outcomes:
        if outcome.proposal is None:
            record.rejected.append(outcome.rejection())
            continue
        task_id = unique_task_id(outcome.proposal.task_id, config.generation, taken)
        taken.add(task_id)
        task_dir = materialise(outcome.proposal, staging_dir, task_id=task_id, limits=config.limits)
        verdict = check_proposal(
            task_dir,
            pool_index,
            engine,
            image_map,
            artifact_root,
            make_agent=make_agent,
            attempts=config.attempts,
            oracle_runs=config.oracle_runs,
            run_id=run_id,
            threshold=config.similarity_threshold,
            on_trial=on_trial,
        )
        if on_verdict:
            on_verdict(verdict)
        if verdict.reason is not None:
            record.rejected.append(Rejection(task_id=outcome.proposal.task_id, reason=verdict.reason, detail=verdict.detail))
            continue
        pool_index.add(load_task(task_dir))
        accepted.append((outcome.proposal, verdict))
    splits = assign_splits(
        [v.content_hash for _p, v in accepted],
        config.held_out_fraction,
        seed=config.seed,
        generation=config.generation,
        pool_total=config.pool_total,
        pool_held_out=config.pool_held_out,
    )
    for proposal, verdict in accepted:
        record.admitted.append(
            AdmittedTask(
                task_id=verdict.task_id,
                proposed_id=proposal.task_id,
                path=verdict.path,
                content_hash=verdict.content_hash,
                category=proposal.category,
                declared_difficulty=proposal.difficulty,
                split=splits[verdict.content_hash],
                difficulty=verdict.difficulty,
                provenance=make_provenance(
                    verdict, proposed_id=proposal.task_id, pair=pair, generation=config.generation, run_id=run_id
                ),
            )
        )
    return record


def _model_agent_factory(contract: Any, client: openai.OpenAI | str | None) -> Callable[[], Agent]:
    from mindforge.agent.loop import ModelAgent

    base_url = str(client.base_url) if isinstance(client, openai.OpenAI) else client
    return lambda: ModelAgent(contract, base_url=base_url)
