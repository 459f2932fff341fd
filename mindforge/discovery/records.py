"""Records of a Discovery run: rejection reasons, per-proposal verdicts, admitted tasks.

Every model here is small plain data (pydantic), so that Temporal workflows and the
report can carry them; task files stay on disk and the records hold their paths.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from mindforge.evaluation.splits import PoolSplit


class RejectReason(StrEnum):
    """Why a proposal was not admitted (one code per rejection).

    * ``malformed`` - the reply or the proposal does not follow the required structure
      (not JSON, a missing or extra field, a bad path, a Dockerfile not from an allowed
      base, a file over the size limits); never patched.
    * ``duplicate_instruction`` - the instruction is a near-duplicate of a pool task's.
    * ``duplicate_tests`` - the ``tests/`` folder is byte-identical to a pool task's.
    * ``tests_read_solution`` - a test file refers to the reference solution.
    * ``answer_in_instruction`` - the instruction contains an answer verbatim (a file
      the solution writes, or a multi-line literal the tests expect).
    * ``env_build_failed`` - the environment did not build within its limit.
    * ``invalid`` - the task directory did not load or the sandbox did not start.
    * ``broken`` - the reference solution does not pass its tests.
    * ``trivially_passing`` - doing nothing (the nop agent) passes the tests.
    * ``flaky`` - two runs of the reference solution disagree.
    * ``too_easy`` - the current pair solved it on every attempt.
    * ``estimate_failed`` - no attempt of the current pair yielded a real reward
      (infrastructure or verifier errors), so the difficulty is unknown.
    """

    MALFORMED = "malformed"
    DUPLICATE_INSTRUCTION = "duplicate_instruction"
    DUPLICATE_TESTS = "duplicate_tests"
    TESTS_READ_SOLUTION = "tests_read_solution"
    ANSWER_IN_INSTRUCTION = "answer_in_instruction"
    ENV_BUILD_FAILED = "env_build_failed"
    INVALID = "invalid"
    BROKEN = "broken"
    TRIVIALLY_PASSING = "trivially_passing"
    FLAKY = "flaky"
    TOO_EASY = "too_easy"
    ESTIMATE_FAILED = "estimate_failed"


class Rejection(BaseModel):
    """A rejected proposal, for the report.

    Attributes:
        task_id: the id the model proposed (``""`` when the reply as a whole was
            unusable).
        reason: the reason code.
        detail: one or two lines of evidence.
    """

    task_id: str
    reason: RejectReason
    detail: str = ""


class DifficultyEstimate(BaseModel):
    """The current pair's success on a task over a few attempts.

    Attributes:
        attempts: trials run.
        successes: trials that passed (reward 1).
        scored: trials with a real reward (infrastructure and verifier errors excluded).
        success_rate: ``successes / scored``, None when no trial has a real reward.
        trial_ids: the trials behind the estimate (artifacts under the run's folder).
        run_id: the evaluation run.
    """

    attempts: int
    successes: int
    scored: int
    success_rate: float | None
    trial_ids: list[str] = Field(default_factory=list)
    run_id: str = ""


class PairInfo(BaseModel):
    """The model-harness pair that proposed a task.

    Attributes:
        contract_hash: the HCP contract's content hash.
        contract_ref: ``name@revision`` of the contract.
        model: the base model id.
        adapter: the adapter name served by the endpoint (``""`` = base weights).
    """

    contract_hash: str
    contract_ref: str
    model: str
    adapter: str = ""

    @classmethod
    def from_contract(cls, contract: Any) -> PairInfo:
        """The pair described by an :class:`~mindforge.hcp.HCPContract`."""
        return cls(
            contract_hash=contract.content_hash,
            contract_ref=contract.ref,
            model=contract.model.id,
            adapter=contract.model.adapter or "",
        )


class ProposalVerdict(BaseModel):
    """Outcome of the checks on one materialised proposal.

    Attributes:
        task_id: the task directory's name (the generation-prefixed id).
        path: the task directory (staging area).
        content_hash: sha256 over the task's files (``""`` when it did not load).
        reason: None when every check passed, else why it is rejected.
        detail: evidence for the reason (or a summary of the checks when accepted).
        validation_verdict: the verdict of ``validate_task`` when it ran.
        oracle_rewards / nop_reward: the validation rewards (None = no real reward).
        difficulty: the current pair's success estimate, when it ran.
    """

    task_id: str
    path: str
    content_hash: str = ""
    reason: RejectReason | None = None
    detail: str = ""
    validation_verdict: str | None = None
    oracle_rewards: list[float | None] = Field(default_factory=list)
    nop_reward: float | None = None
    difficulty: DifficultyEstimate | None = None

    @property
    def accepted(self) -> bool:
        """True when the proposal passed every check."""
        return self.reason is None


class AdmittedTask(BaseModel):
    """A proposal that passed every check and joins the pool.

    Attributes:
        task_id: the admitted id, ``g<generation>-<proposed id>`` (unique in the pool).
        proposed_id: the id the model proposed.
        path: the task directory (staging until moved by admission).
        content_hash: sha256 over the task's files.
        category / declared_difficulty: from the proposal.
        split: ``search``, ``selection`` or ``sealed`` (assigned by
            :func:`mindforge.evaluation.assign_splits`, never moved later).
        difficulty: the current pair's success estimate.
        provenance: JSON stored with the task (generation, proposing pair, validation
            evidence, difficulty).
    """

    task_id: str
    proposed_id: str
    path: str
    content_hash: str
    category: str
    declared_difficulty: str
    split: PoolSplit
    difficulty: DifficultyEstimate | None = None
    provenance: dict[str, Any] = Field(default_factory=dict)


class DiscoveryRecord(BaseModel):
    """What one Discovery run proposed, admitted and rejected (for the report).

    Attributes:
        run_id: the Discovery run.
        generation: the generation that ran Discovery.
        pair: the proposing pair.
        requested: proposals asked for (K).
        proposed: proposals received (items in the reply, malformed ones included).
        admitted: the admitted tasks.
        rejected: the rejected proposals with their reasons.
    """

    run_id: str
    generation: int
    pair: PairInfo
    requested: int
    proposed: int
    admitted: list[AdmittedTask] = Field(default_factory=list)
    rejected: list[Rejection] = Field(default_factory=list)

    def reason_counts(self) -> dict[str, int]:
        """Rejections per reason code, in the order of :class:`RejectReason`."""
        counts = {r.value: 0 for r in RejectReason}
        for item in self.rejected:
            counts[item.reason.value] += 1
        return {k: v for k, v in counts.items() if v}


class StagedProposal(BaseModel):
    """A well-formed proposal written to the staging area.

    Attributes:
        task_id: the generation-prefixed id (the directory name).
        proposed_id: the id the model proposed.
        path: the task directory.
        category / declared_difficulty: from the proposal.
        family / params: the task family and its parameters (family proposals only).
    """

    task_id: str
    proposed_id: str
    path: str
    category: str
    declared_difficulty: str
    family: str = ""
    params: dict[str, Any] = Field(default_factory=dict)


class ProposalBatch(BaseModel):
    """What :func:`propose_batch` produced.

    Attributes:
        run_id / generation / pair: identity of the run.
        requested: proposals asked for; proposed: items in the reply.
        staged: well-formed proposals, in reply order.
        rejected: malformed ones (or the whole reply), with reasons.
    """

    run_id: str
    generation: int
    pair: PairInfo
    requested: int
    proposed: int
    staged: list[StagedProposal] = Field(default_factory=list)
    rejected: list[Rejection] = Field(default_factory=list)
