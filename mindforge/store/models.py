"""SQLModel tables of the store: lineages, generations, contracts, adapters, tasks, trials,
audits and configuration-search jobs.

One schema serves SQLite (default) and Postgres: JSON columns use SQLAlchemy's ``JSON``,
timestamps are aware UTC (:class:`~mindforge.store.columns.UTCDateTime`), status fields
are string enums stored as ``VARCHAR``, free text from outside (failure details, edits)
keeps no NUL character, which Postgres text refuses (:class:`~mindforge.store.columns.NulFreeText`).
Idempotency lives in keys, after SkyRL's
``tinker/db_models.py``: a trial's primary key is its deterministic ``trial_id``, so a
retried activity cannot store one attempt twice. Tables are changed only through
Alembic migrations (``mindforge/store/migrations``).

JSON columns are not mutation-tracked: assign a new dict or list, never edit in place.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import JSON, Field, SQLModel

from mindforge.domain import AuditOwner, RunStatus, TaskSource
from mindforge.evaluation.splits import PoolSplit
from mindforge.store.columns import NulFreeString, NulFreeText, UTCDateTime, str_enum
from mindforge.trials.record import (
    FailureClass,
    LimitFired,
    PhaseTimings,
    TrialRecord,
    utcnow,
)

# Named constraints make later migrations (batch mode on SQLite) predictable.
SQLModel.metadata.naming_convention = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def new_id() -> str:
    """A fresh random id (32 hex characters)."""
    return uuid.uuid4().hex


def _created_at() -> Any:
    return Field(default_factory=utcnow, sa_type=UTCDateTime)


def _json_dict() -> Any:
    return Field(default_factory=dict, sa_type=JSON)


def _json_list() -> Any:
    return Field(default_factory=list, sa_type=JSON)


_GENERATION_FK = ("generations.lineage_id", "generations.index")


class LineageCreate(SQLModel):
    """What a caller gives to start a lineage.

    Attributes:
        name: unique human name of the lineage.
        spec: the lineage spec as JSON (tasks path, contract, generations, attempts,
            split fractions, budgets, ...); its model belongs to the caller.
        workflow_id: the Temporal workflow id driving the lineage, once known.
    """

    name: str = Field(unique=True, index=True, min_length=1)
    spec: dict[str, Any] = _json_dict()
    workflow_id: str | None = None


class Lineage(LineageCreate, table=True):
    """A lineage: a chain of generations of one model-harness pair.

    Attributes:
        id: random id.
        status: lifecycle status.
        current_generation: index of the generation in progress (or last finished).
        stages_run: generation index (as text, JSON keys are strings) -> names of the
            stages completed in it, in order.
        created_at / updated_at: aware UTC.
    """

    __tablename__ = "lineages"

    id: str = Field(default_factory=new_id, primary_key=True)
    status: RunStatus = Field(default=RunStatus.PENDING, sa_type=str_enum(RunStatus), index=True)
    current_generation: int = 0
    stages_run: dict[str, list[str]] = _json_dict()
    created_at: datetime = _created_at()
    updated_at: datetime = _created_at()


class Generation(SQLModel, table=True):
    """One generation of a lineage: the pair (adapter revision, contract) and what happened to it.

    Attributes:
        index: 0-based, unique within the lineage.
        adapter_revision_id: the adapter in use; None = base weights.
        contract_hash: the HCP contract in use.
        stages_run: names of completed stages, in order.
        record: summary as JSON (counts, budget spent, stop reason, coverage,
            held-out lift, ...).
    """

    __tablename__ = "generations"
    __table_args__ = (sa.UniqueConstraint("lineage_id", "index"),)

    id: str = Field(default_factory=new_id, primary_key=True)
    lineage_id: str = Field(foreign_key="lineages.id", index=True)
    index: int = Field(ge=0)
    status: RunStatus = Field(default=RunStatus.PENDING, sa_type=str_enum(RunStatus))
    adapter_revision_id: str | None = Field(default=None, foreign_key="adapter_revisions.id")
    contract_hash: str | None = Field(default=None, foreign_key="contracts.hash")
    stages_run: list[str] = _json_list()
    record: dict[str, Any] = _json_dict()
    created_at: datetime = _created_at()
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class Contract(SQLModel, table=True):
    """A registered, immutable HCP contract revision (see docs/design.md).

    Attributes:
        hash: the contract's content hash (hex), primary key.
        name / revision: identity; ``name@revision`` is unique.
        parent_hash: the contract it was derived from, None for a root.
        edit: the recorded edit that produced it from the parent.
        toml_text: the contract file verbatim.
    """

    __tablename__ = "contracts"
    __table_args__ = (sa.UniqueConstraint("name", "revision"),)

    hash: str = Field(primary_key=True)
    name: str = Field(index=True)
    revision: str
    parent_hash: str | None = Field(default=None, foreign_key="contracts.hash")
    edit: str = Field(default="", sa_type=NulFreeString)
    toml_text: str = Field(sa_type=sa.Text)
    created_at: datetime = _created_at()


class AdapterRevisionCreate(SQLModel):
    """What a trainer gives to register a LoRA adapter revision.

    Attributes:
        name: versioned serving name (what the endpoint loads it as), unique.
        base_model: the frozen base model id.
        lineage_id: the lineage that trained it (None for an imported adapter).
        revision: revision number within the lineage (0-based).
        parent_id: the adapter revision it was trained from, None for the first.
        path: the adapter directory under the artifact root.
        sha256: hash over the adapter's weight files (hex).
        rank / alpha: LoRA rank and scaling alpha.
        target_modules: module names LoRA was applied to.
        training_config: trainer hyperparameters as JSON.
        trial_ids: the trials whose trajectories it was trained on.
    """

    name: str = Field(unique=True, index=True)
    base_model: str
    lineage_id: str | None = Field(default=None, foreign_key="lineages.id", index=True)
    revision: int = Field(default=0, ge=0)
    parent_id: str | None = Field(default=None, foreign_key="adapter_revisions.id")
    path: str
    sha256: str
    rank: int = Field(gt=0)
    alpha: float = Field(gt=0)
    target_modules: list[str] = _json_list()
    training_config: dict[str, Any] = _json_dict()
    trial_ids: list[str] = _json_list()


class AdapterRevision(AdapterRevisionCreate, table=True):
    """A registered, immutable LoRA adapter revision."""

    __tablename__ = "adapter_revisions"
    __table_args__ = (sa.UniqueConstraint("lineage_id", "revision"),)

    id: str = Field(default_factory=new_id, primary_key=True)
    created_at: datetime = _created_at()


class StoredTask(SQLModel, table=True):
    """A task known to the store, keyed by content (named apart from ``mindforge.tasks.model.Task``).

    Attributes:
        id: the task's content hash (sha256 hex over all its files).
        task_id: the task's id (its directory name).
        path: the task directory when registered.
        source: bundled, imported or discovered.
        provenance: for discovered tasks, where it came from (generation, the pair that
            proposed it, validation evidence).
    """

    __tablename__ = "tasks"

    id: str = Field(primary_key=True)
    task_id: str = Field(index=True)
    path: str
    category: str = "uncategorized"
    difficulty: str = "unknown"
    source: TaskSource = Field(sa_type=str_enum(TaskSource))
    provenance: dict[str, Any] = _json_dict()
    created_at: datetime = _created_at()


class PoolMembership(SQLModel, table=True):
    """A task in a lineage's pool, on one split (search, selection or sealed); at most once, never moved."""

    __tablename__ = "pool_memberships"

    lineage_id: str = Field(foreign_key="lineages.id", primary_key=True)
    task_hash: str = Field(foreign_key="tasks.id", primary_key=True)
    split: PoolSplit = Field(sa_type=str_enum(PoolSplit))
    added_generation: int = Field(default=0, ge=0)
    created_at: datetime = _created_at()


class Trial(SQLModel, table=True):
    """A stored trial: the fields of :class:`mindforge.trials.record.TrialRecord` plus where it ran.

    ``trial_id`` is the primary key and is computed by the caller deterministically
    (:func:`mindforge.store.trials.make_trial_id`), so an activity retried after a
    partial write stores nothing twice. ``(lineage_id, generation_index)`` references
    a generation row when both are set; trials outside lineages leave them None.
    Timings are columns in seconds.
    """

    __tablename__ = "trials"
    __table_args__ = (
        sa.ForeignKeyConstraint(["lineage_id", "generation_index"], list(_GENERATION_FK)),
        sa.Index("ix_trials_lineage_generation_stage", "lineage_id", "generation_index", "stage"),
    )

    trial_id: str = Field(primary_key=True)
    lineage_id: str | None = Field(default=None, foreign_key="lineages.id")
    generation_index: int | None = None
    stage: str = ""
    run_id: str = Field(index=True)
    task_id: str
    task_hash: str = Field(index=True)
    agent: str
    contract_hash: str | None = Field(default=None, index=True)
    adapter: str = ""
    attempt: int = 0
    reward: float | None = None
    reward_details: dict[str, float] = _json_dict()
    failure_class: FailureClass | None = Field(default=None, sa_type=str_enum(FailureClass))
    failure_detail: str = Field(default="", sa_type=NulFreeText)
    limit_fired: LimitFired | None = Field(default=None, sa_type=str_enum(LimitFired))
    build_sec: float = 0.0
    start_sec: float = 0.0
    agent_sec: float = 0.0
    verify_sec: float = 0.0
    teardown_sec: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    num_turns: int = 0
    worker: str = ""
    artifacts: dict[str, str] = _json_dict()
    experience_entries: list[str] = _json_list()
    started_at: datetime = Field(sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    created_at: datetime = _created_at()

    @classmethod
    def from_record(
        cls, record: TrialRecord, *, lineage_id: str | None, generation_index: int | None, stage: str
    ) -> Trial:
        """Build a row from a trial record and where it ran."""
        data = record.model_dump(exclude={"timings"})
        data.update(record.timings.model_dump())
        return cls(**data, lineage_id=lineage_id, generation_index=generation_index, stage=stage)

    def to_record(self) -> TrialRecord:
        """The row as a :class:`~mindforge.trials.record.TrialRecord` (store-only fields dropped)."""
        # instance_steps_sec has no column (it is part of start_sec): it comes back as 0.0
        columns = [name for name in PhaseTimings.model_fields if name in Trial.model_fields]
        timings = PhaseTimings(**{name: getattr(self, name) for name in columns})
        data = {name: getattr(self, name) for name in TrialRecord.model_fields if name != "timings"}
        return TrialRecord(**data, timings=timings)


class InfraAttempt(SQLModel, table=True):
    """One run of a trial that an infrastructure fault ended, kept apart from the trials.

    When a trial ends in a retryable infrastructure class (the sandbox engine, the policy
    endpoint or the Ray worker failed: :data:`mindforge.trials.record.RETRYABLE_INFRA_CLASSES`),
    the ``run_trials`` activity stores this row instead of the trial and fails its attempt,
    so Temporal's retry policy runs the trial again; the ``trials`` row is written only by
    the run that ends cleanly (or by the last attempt the policy allows, with no reward).
    The key is (``trial_id``, ``activity_attempt``): a retried write stores nothing twice.

    Attributes:
        trial_id: the trial that will run again.
        activity_attempt: the Temporal attempt (1-based) of the ``run_trials`` activity.
        failure_class / failure_detail: what failed, in the trial record's words.
        worker: where it ran (``host/ray-node-id/pid``; "" when the Ray worker itself died).
    """

    __tablename__ = "infra_attempts"
    __table_args__ = (sa.ForeignKeyConstraint(["lineage_id", "generation_index"], list(_GENERATION_FK)),)

    trial_id: str = Field(primary_key=True)
    activity_attempt: int = Field(primary_key=True)
    lineage_id: str = Field(foreign_key="lineages.id", index=True)
    generation_index: int
    stage: str
    task_id: str
    failure_class: FailureClass = Field(sa_type=str_enum(FailureClass))
    failure_detail: str = Field(default="", sa_type=sa.Text)
    worker: str = ""
    created_at: datetime = _created_at()


class Audit(SQLModel, table=True):
    """The audit verdict on one failed trial (at most one per trial).

    Attributes:
        failure_class: the class the audit settled on (may refine the trial's).
        owner: who owns the failure.
        evidence: JSON evidence (log excerpts, rule ids, judge rationale).
        judged_by: ``"rules"`` or ``"judge:<model>"``.
    """

    __tablename__ = "audits"

    trial_id: str = Field(foreign_key="trials.trial_id", primary_key=True)
    failure_class: FailureClass = Field(sa_type=str_enum(FailureClass))
    owner: AuditOwner = Field(sa_type=str_enum(AuditOwner), index=True)
    evidence: dict[str, Any] = _json_dict()
    judged_by: str
    created_at: datetime = _created_at()


class SearchJob(SQLModel, table=True):
    """A configuration-search job within one generation, resumable from ``state``.

    Attributes:
        budget / spent: limits and consumption as JSON (trials, tokens, seconds...).
        stop_reason: why the job stopped (budget, coverage, cancelled...).
        state: the last committed search step, enough to resume.
    """

    __tablename__ = "search_jobs"
    __table_args__ = (sa.ForeignKeyConstraint(["lineage_id", "generation_index"], list(_GENERATION_FK)),)

    id: str = Field(default_factory=new_id, primary_key=True)
    lineage_id: str = Field(foreign_key="lineages.id", index=True)
    generation_index: int
    status: RunStatus = Field(default=RunStatus.PENDING, sa_type=str_enum(RunStatus))
    budget: dict[str, Any] = _json_dict()
    spent: dict[str, Any] = _json_dict()
    stop_reason: str | None = None
    state: dict[str, Any] = _json_dict()
    created_at: datetime = _created_at()
    updated_at: datetime = _created_at()


class SearchCandidate(SQLModel, table=True):
    """A candidate contract of a search job, with the edit that derived it (once per job)."""

    __tablename__ = "search_candidates"

    job_id: str = Field(foreign_key="search_jobs.id", primary_key=True)
    contract_hash: str = Field(foreign_key="contracts.hash", primary_key=True)
    parent_hash: str | None = Field(default=None, foreign_key="contracts.hash")
    edit: str = Field(default="", sa_type=NulFreeString)
    step: int = Field(default=0, ge=0)
    created_at: datetime = _created_at()


class ExperienceEntryRow(SQLModel, table=True):
    """A validated entry of a lineage's experience library (``mindforge.experience``), once per lineage.

    Only tasks on the lineage's search split are accepted
    (:func:`mindforge.store.experience.add_entries` refuses any other). ``entry`` holds
    the whole :class:`~mindforge.experience.entry.ExperienceEntry` as JSON; the other
    columns repeat what queries filter on.
    """

    __tablename__ = "experience_entries"

    lineage_id: str = Field(foreign_key="lineages.id", primary_key=True)
    entry_id: str = Field(primary_key=True)
    task_id: str
    task_hash: str = Field(foreign_key="tasks.id", index=True)
    provenance: str = Field(sa_type=sa.String(32))
    trial_id: str
    generation_index: int = Field(default=0, ge=0)
    entry: dict[str, Any] = _json_dict()
    created_at: datetime = _created_at()


class ExperienceSnapshotRow(SQLModel, table=True):
    """A published snapshot of a lineage's library: its content hash, entries and document.

    Attributes:
        snapshot_id: sha256 of the snapshot's canonical JSON (``document``).
        generation_index: the generation that published it.
        entry_ids: its entries' ids, sorted.
        oracle_entries / model_entries: entry counts by provenance.
        document: the canonical JSON (what a contract embeds).
    """

    __tablename__ = "experience_snapshots"

    lineage_id: str = Field(foreign_key="lineages.id", primary_key=True)
    snapshot_id: str = Field(primary_key=True)
    generation_index: int = Field(default=0, ge=0)
    entry_ids: list[str] = _json_list()
    oracle_entries: int = 0
    model_entries: int = 0
    document: str = Field(sa_type=sa.Text)
    created_at: datetime = _created_at()


class ExperienceRejectionRow(SQLModel, table=True):
    """A candidate entry that validation rejected, with its reason (once per lineage, generation and entry)."""

    __tablename__ = "experience_rejections"

    lineage_id: str = Field(foreign_key="lineages.id", primary_key=True)
    generation_index: int = Field(primary_key=True)
    entry_id: str = Field(primary_key=True)
    task_id: str
    task_hash: str
    provenance: str = Field(sa_type=sa.String(32))
    trial_id: str
    reason: str = Field(sa_type=sa.String(32))
    detail: str = Field(default="", sa_type=sa.Text)
    created_at: datetime = _created_at()
