"""Gather a lineage's report data from the store: coverage, audits, spend, lineage, decisions, sealed lift.

Everything the HTML, Markdown and JSON renderers show comes from :class:`ReportData`,
built by :func:`gather_report_data` from the store alone (lineage, generations, pool,
trials, audits, search jobs, candidates, contracts).

Three kinds of evidence, kept apart under their own names (docs/design.md, "Three splits"):

- *search-set coverage*: the model trials on search-split tasks; the base evaluation is
  their subset under the generation's own contract, every other contract a search
  candidate. Coverage is an upper bound across contracts, not skill.
- *selection decisions*: the successor-contract choice and the adapter promotion gate,
  each with the split it read (``decided_on``) and its selection scores.
- *experience library*: its entries by provenance, what each growth round added and
  rejected (:mod:`mindforge.reports.experience`).
- *sealed readings*: the sealed split read apart by provenance, never pooled (sealed
  instances, with their copyable and needs-adaptation parts; sealed families; sealed
  tasks; restated tasks; dealt tasks): per reading, every pair's sealed success and its
  paired lifts over the pair before it and over pair 0, with intervals by unit and task
  counts (:mod:`mindforge.reports.readings`); each generation's sealed lift is one figure
  per reading (``sealed_lifts``), never one reading under a general name.
- *curriculum*: for a lineage drawn from task families, the families drawn and held out,
  the instances per split, and what validation kept and rejected.
"""

from __future__ import annotations

import difflib
from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from sqlmodel import Session

from mindforge.audit import usable_for_scoring
from mindforge.evaluation import Interval, PoolSplit, wilson_interval
from mindforge.hcp import diff_contracts, format_diff, loads_contract
from mindforge.reports.compounding import (
    edits_between,
    generation_lifts,
    generation_readings,
    library_entries,
)
from mindforge.reports.experience import ExperienceReport, round_rows
from mindforge.reports.readings import (
    CurriculumSummary,
    ReadingsSummary,
    ReadingTable,
    curriculum_summary,
    reading_tables,
    readings_summary,
)
from mindforge.search.coverage import CoverageSummary, Ledger
from mindforge.store import Contract, Trial
from mindforge.store import experience as experience_repo
from mindforge.store import lineages as lineage_repo
from mindforge.store import pool as pool_repo
from mindforge.store import registry as registry_repo
from mindforge.store import search as search_repo
from mindforge.store import trials as trial_repo
from mindforge.store.errors import NotFoundError
from mindforge.trials.record import utcnow

#: trial stages that make up search-set coverage
COVERAGE_STAGES = frozenset({"expansion", "search"})


class ContractInfo(BaseModel):
    """A contract in the lineage: identity, parent, edit and diff against the parent.

    Attributes:
        chain: the edits from the nearest generation contract (or root) to this one, in
            order; a composed candidate lists all of them.
    """

    hash: str
    ref: str
    parent_hash: str | None = None
    parent_ref: str | None = None
    edit: str = ""
    chain: list[str] = Field(default_factory=list)
    diff: str = ""
    generations: list[int] = Field(default_factory=list)
    candidate_of: list[int] = Field(default_factory=list)


class GenerationCoverage(BaseModel):
    """Coverage of one generation's search split.

    Attributes:
        index: the generation.
        base_contract: the generation's contract hash.
        summary: both coverages over all search-split tasks with model trials.
        base_solved: tasks the base evaluation solved.
        failing: tasks the base evaluation did not solve.
        failing_covered: of those, tasks some candidate solved (adaptive search).
        failing_single: of those, the most any one candidate solved.
        failing_single_contract: that candidate's hash.
        curve: ``[attempts, tasks covered]`` after every attempt, in start-time order.
        matrix: task hash -> contract hash -> ``[successes, usable, attempts]``.
    """

    index: int
    base_contract: str | None = None
    summary: CoverageSummary
    base_solved: int = 0
    failing: int = 0
    failing_covered: int = 0
    failing_single: int = 0
    failing_single_contract: str | None = None
    curve: list[tuple[int, int]] = Field(default_factory=list)
    matrix: dict[str, dict[str, list[int]]] = Field(default_factory=dict)


class SpendRow(BaseModel):
    """Trials, tokens and wall time of one generation's stage."""

    generation: int
    stage: str
    trials: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_sec: float = 0.0


class NodeRow(BaseModel):
    """Trials per Ray node: where a lineage's trials ran (from each record's ``worker``).

    Attributes:
        host: the node's host name (a cluster node's container name).
        node: the Ray node id's first 8 characters ("" for trials run outside Ray).
        trials / passed: the node's trials and how many passed.
        wall_sec: their summed wall time (seconds, build to teardown).
    """

    host: str
    node: str = ""
    trials: int = 0
    passed: int = 0
    wall_sec: float = 0.0


class AuditRow(BaseModel):
    """How many failed trials an audit put in one (failure class, owner) bucket."""

    failure_class: str
    owner: str
    count: int
    judged_by_rules: int = 0


class SearchJobInfo(BaseModel):
    """A configuration-search job's budget, spending and stop reason."""

    id: str
    generation: int
    status: str
    budget: dict[str, Any] = Field(default_factory=dict)
    spent: dict[str, Any] = Field(default_factory=dict)
    stop_reason: str | None = None
    candidates: int = 0


class PairScoreRow(BaseModel):
    """One pair's pass rate on the selection split in one generation (Wilson interval).

    Sealed pass rates are per reading, never pooled: :attr:`ReportData.readings`.
    """

    generation: int
    split: PoolSplit
    contract_hash: str
    adapter: str = ""
    score: Interval


class GenerationEvidence(BaseModel):
    """A generation's evidence, each kind under its own name.

    Attributes:
        index: the generation.
        splits: tasks per split in the pool during this generation.
        decisions: the selection-split decisions (``kind``, ``decided_on``, outcome,
            reason, scores, ``trial_ids``).
        sealed_lifts: reading -> ``{"lift", "reason", "vs_root"}``: the pair handed on over
            the parent on that reading (``{"mean", "lo", "hi", "n_tasks", "n_trials", "unit",
            "n_units", "method", ...}`` or None with the reason) and over generation 0's pair
            (:func:`mindforge.reports.compounding.generation_lifts`; a generation recorded
            before readings existed has its one figure under ``tasks``); ``{}``: not measured yet.
        scores: pass rates per pair on the selection split.
        gate_power: each gate's power at the parent's measured selection rate, as the
            generation recorded it when it started (``{}``: not recorded).
    """

    index: int
    splits: dict[str, int] = Field(default_factory=dict)
    decisions: list[dict[str, Any]] = Field(default_factory=list)
    sealed_lifts: dict[str, dict[str, Any]] = Field(default_factory=dict)
    scores: list[PairScoreRow] = Field(default_factory=list)
    gate_power: dict[str, Any] = Field(default_factory=dict)


class ReportData(BaseModel):
    """Everything a lineage report shows.

    Attributes:
        generations: one object per generation: ``index``, ``status``, ``contract_hash``,
            ``adapter_revision_id``, ``stages_run``, ``splits``, ``decisions``,
            ``sealed_lifts`` (reading -> ``{"lift", "reason", "vs_root"}``), ``gate_power``, then
            ``readings``: reading -> the figures of the pair the generation hands on
            (:func:`mindforge.reports.compounding.generation_figures`: ``sealed``,
            ``sealed_parent``, ``base``, ``kept``, ``lift_vs_prev``, ``lift_vs_root``,
            ``attribution``, ``n_tasks``, ``parts``...), and ``record`` (less Discovery).
        readings: reading -> :class:`~mindforge.reports.readings.ReadingTable` (every pair's
            row on that reading), in reading order.
        readings_record: what the lineage recorded at start about its readings.
        curriculum: the families drawn and held out, and the preparation (None: no families).
    """

    lineage_id: str
    lineage_name: str
    status: str
    generated_at: datetime = Field(default_factory=utcnow)
    generations: list[dict[str, Any]] = Field(default_factory=list)
    task_ids: dict[str, str] = Field(default_factory=dict)
    contracts: list[ContractInfo] = Field(default_factory=list)
    coverage: list[GenerationCoverage] = Field(default_factory=list)
    audits: list[AuditRow] = Field(default_factory=list)
    spend: list[SpendRow] = Field(default_factory=list)
    nodes: list[NodeRow] = Field(default_factory=list)
    search_jobs: list[SearchJobInfo] = Field(default_factory=list)
    evidence: list[GenerationEvidence] = Field(default_factory=list)
    split_warnings: list[str] = Field(default_factory=list)
    discovery: dict[int, Any] = Field(default_factory=dict)
    readings: dict[str, ReadingTable] = Field(default_factory=dict)
    readings_record: ReadingsSummary = Field(default_factory=ReadingsSummary)
    curriculum: CurriculumSummary | None = None
    experience: ExperienceReport = Field(default_factory=ExperienceReport)

    def contract_edit(self, contract_hash: str | None) -> str:
        """The edits that made a contract from its generation's contract, joined by " + " ("" when none)."""
        info = next((info for info in self.contracts if info.hash == contract_hash), None)
        return " + ".join(info.chain or [info.edit]) if info is not None and (info.chain or info.edit) else ""

    def contract_ref(self, contract_hash: str | None) -> str:
        """``name@revision`` of a contract hash, or a short hash."""
        for info in self.contracts:
            if info.hash == contract_hash:
                return info.ref
        return (contract_hash or "-")[:12]


def gather_report_data(session: Session, lineage_id: str) -> ReportData:
    """Collect a lineage's report data from the store.

    Args:
        session: an open session.
        lineage_id: the lineage's id or name.

    Returns:
        the report data.

    Raises:
        NotFoundError: no lineage with that id or name.
    """
    lineage = lineage_repo.get_lineage(session=session, lineage_id=lineage_id) or lineage_repo.get_lineage_by_name(
        session=session, name=lineage_id
    )
    if lineage is None:
        raise NotFoundError("lineage", lineage_id)
    generations = lineage_repo.list_generations(session=session, lineage_id=lineage.id)
    members = pool_repo.list_pool(session=session, lineage_id=lineage.id)
    splits = {m.task_hash: m.split for m in members}
    trials = trial_repo.list_trials(session=session, lineage_id=lineage.id)
    data = ReportData(lineage_id=lineage.id, lineage_name=lineage.name, status=str(lineage.status.value))
    data.split_warnings = list(lineage.spec.get("split_warnings") or [])
    data.task_ids = _task_ids(session, splits, trials)
    data.evidence = [_evidence(g, members, trials, splits) for g in generations]
    data.generations = [
        {
            "index": g.index,
            "status": g.status.value,
            "contract_hash": g.contract_hash,
            "adapter_revision_id": g.adapter_revision_id,
            "stages_run": list(g.stages_run),
            "splits": ev.splits,
            "decisions": ev.decisions,
            "sealed_lifts": ev.sealed_lifts,
            "gate_power": ev.gate_power,
            # per sealed reading, the figures of the pair this generation hands on (mindforge.reports.compounding)
            "readings": generation_readings(g.record),
            "record": {k: v for k, v in g.record.items() if k != "discovery"},
        }
        for g, ev in zip(generations, data.evidence, strict=True)
    ]
    data.discovery = {g.index: g.record["discovery"] for g in generations if g.record.get("discovery")}
    by_generation: dict[int, list[Trial]] = defaultdict(list)
    for trial in trials:
        by_generation[trial.generation_index if trial.generation_index is not None else -1].append(trial)
    contracts_of = {g.index: g.contract_hash for g in generations}
    for index in sorted(i for i in by_generation if i >= 0):
        coverage = _coverage(index, contracts_of.get(index), by_generation[index], splits)
        if coverage.summary.tasks:
            data.coverage.append(coverage)
    data.spend, data.nodes = _spend(trials), _nodes(trials)
    data.audits = _audits(session, lineage.id)
    jobs = search_repo.list_search_jobs(session=session, lineage_id=lineage.id)
    candidates = {job.id: search_repo.list_search_candidates(session=session, job_id=job.id) for job in jobs}
    data.search_jobs = [
        SearchJobInfo(
            id=job.id,
            generation=job.generation_index,
            status=job.status.value,
            budget=dict(job.budget),
            spent=dict(job.spent),
            stop_reason=job.stop_reason,
            candidates=len(candidates[job.id]),
        )
        for job in jobs
    ]
    data.contracts = _contracts(session, generations, jobs, candidates, trials)
    _gather_readings(session, data, lineage.spec or {}, generations, splits)
    data.experience = gather_experience(session, lineage.id, generations)
    return data


def _gather_readings(
    session: Session, data: ReportData, spec: dict[str, Any], generations: list, splits: dict[str, PoolSplit]
) -> None:
    """Fill ``data``'s readings record, one table per sealed reading, and the curriculum."""
    sealed = sum(1 for split in splits.values() if split == PoolSplit.SEALED)
    data.readings_record = readings_summary(spec, sealed)
    data.readings = reading_tables(
        generations, data.readings_record,
        contract_edit=lambda old, new: edits_between(session, old, new),
        library_entries=lambda h: library_entries(session, h),
    )
    data.curriculum = curriculum_summary(spec, {h: PoolSplit(split).value for h, split in splits.items()})


def gather_experience(session: Session, lineage_id: str, generations: list) -> ExperienceReport:
    """The library's entries by provenance, each recorded growth round, and rejections by reason per generation.

    Args:
        session: an open session.
        lineage_id: the lineage.
        generations: its generation rows (their records hold the rounds' reports).
    """
    rows = round_rows([(g.index, dict(g.record)) for g in generations])
    return ExperienceReport(
        entries=experience_repo.library_counts(session=session, lineage_id=lineage_id),
        rounds=rows,
        rejections={
            index: experience_repo.rejection_counts(session=session, lineage_id=lineage_id, generation_index=index)
            for index in sorted({r.generation for r in rows})
        },
    )


def _task_ids(session: Session, splits: dict[str, PoolSplit], trials: list[Trial]) -> dict[str, str]:
    names = {t.task_hash: t.task_id for t in trials}
    for task_hash in splits:
        if task_hash not in names and (row := pool_repo.get_task(session=session, content_hash=task_hash)):
            names[task_hash] = row.task_id
    return names


def _is_model(trial: Trial) -> bool:
    return trial.agent == "model" and bool(trial.contract_hash)


def _coverage(index: int, base: str | None, trials: list[Trial], splits: dict[str, PoolSplit]) -> GenerationCoverage:
    # the base evaluation and the search's own trials: the Update's rollouts of the chosen
    # contract run on search tasks too, but they are training data, not search coverage
    rows = [
        t for t in trials
        if _is_model(t) and t.stage in COVERAGE_STAGES and splits.get(t.task_hash, PoolSplit.SEARCH) == PoolSplit.SEARCH
    ]
    rows.sort(key=lambda t: (t.started_at, t.trial_id))
    records = [t.to_record() for t in rows]
    ledger = Ledger.from_records(records)
    base_solved = ledger.solved_by(base) if base else set()
    failing = [t for t in ledger.tasks if t not in base_solved]
    search = Ledger.from_records([r for r in records if r.contract_hash != base], tasks=failing)
    best, single = search.single_contract()
    matrix: dict[str, dict[str, list[int]]] = defaultdict(dict)
    for (task, contract), tally in ledger.cells.items():
        matrix[task][contract] = [tally.successes, tally.usable, tally.attempts]
    return GenerationCoverage(
        index=index,
        base_contract=base,
        summary=ledger.summary(),
        base_solved=len(base_solved),
        failing=len(failing),
        failing_covered=len(search.cumulative()),
        failing_single=single,
        failing_single_contract=best,
        curve=ledger.coverage_curve(),
        matrix=dict(matrix),
    )


def _evidence(generation, members: list, trials: list[Trial], splits: dict[str, PoolSplit]) -> GenerationEvidence:
    """A generation's split sizes, selection decisions, sealed lift (and its reading) and selection scores."""
    record = generation.record
    counts = {s.value: 0 for s in PoolSplit}
    for m in members:
        if m.added_generation <= generation.index:
            counts[PoolSplit(m.split).value] += 1
    decisions = []
    if successor := record.get("successor"):
        decisions.append({"kind": "successor_contract", **successor})
    if promotion := (record.get("update") or {}).get("promotion"):
        decisions.append({"kind": "adapter_promotion", **promotion})
    scores: list[PairScoreRow] = []
    groups: dict[tuple[PoolSplit, str, str], list[Trial]] = defaultdict(list)
    for t in trials:
        split = splits.get(t.task_hash)
        # selection only: sealed trials are read per reading, never pooled (ReportData.readings)
        if t.generation_index == generation.index and _is_model(t) and split == PoolSplit.SELECTION:
            groups[(PoolSplit(split), t.contract_hash or "", t.adapter)].append(t)
    for (split, contract, adapter), rows in sorted(groups.items()):
        usable = [r for r in rows if usable_for_scoring(r.to_record())]
        passed = sum(1 for r in usable if (r.reward or 0.0) >= 1.0)
        scores.append(
            PairScoreRow(
                generation=generation.index, split=split, contract_hash=contract, adapter=adapter,
                score=wilson_interval(passed, len(usable)),
            )
        )
    return GenerationEvidence(
        index=generation.index,
        splits=counts,
        decisions=decisions,
        sealed_lifts=generation_lifts(record),
        scores=scores,
        gate_power=record.get("gate_power") or {},
    )


def _spend(trials: list[Trial]) -> list[SpendRow]:
    rows: dict[tuple[int, str], SpendRow] = {}
    for t in trials:
        key = (t.generation_index if t.generation_index is not None else -1, t.stage or "-")
        row = rows.setdefault(key, SpendRow(generation=key[0], stage=key[1]))
        row.trials += 1
        row.prompt_tokens += t.prompt_tokens
        row.completion_tokens += t.completion_tokens
        row.wall_sec += t.build_sec + t.start_sec + t.agent_sec + t.verify_sec + t.teardown_sec
    return [rows[k] for k in sorted(rows)]


def _nodes(trials: list[Trial]) -> list[NodeRow]:
    """Trials grouped by ``worker``'s host and Ray node (``host/ray-node-id/pid``), most trials first."""
    rows: dict[tuple[str, str], NodeRow] = {}
    for t in trials:
        host, _, rest = (t.worker or "in-process").partition("/")
        node = rest.partition("/")[0][:8]
        row = rows.setdefault((host, node), NodeRow(host=host, node=node))
        row.trials += 1
        row.passed += int((t.reward or 0.0) >= 1.0)
        row.wall_sec += t.build_sec + t.start_sec + t.agent_sec + t.verify_sec + t.teardown_sec
    return sorted(rows.values(), key=lambda r: (-r.trials, r.host, r.node))


def _audits(session: Session, lineage_id: str) -> list[AuditRow]:
    counts: Counter[tuple[str, str]] = Counter()
    by_rules: Counter[tuple[str, str]] = Counter()
    for audit in trial_repo.list_audits(session=session, lineage_id=lineage_id):
        key = (audit.failure_class.value, audit.owner.value)
        counts[key] += 1
        by_rules[key] += int(audit.judged_by == "rules")
    return [
        AuditRow(failure_class=cls, owner=owner, count=n, judged_by_rules=by_rules[(cls, owner)])
        for (cls, owner), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def _contracts(
    session: Session, generations: list, jobs: list, candidates: dict, trials: list[Trial]
) -> list[ContractInfo]:
    wanted: dict[str, ContractInfo] = {}
    rows: dict[str, Contract] = {}
    by_index = {g.index: g.contract_hash for g in generations}

    def visit(contract_hash: str | None) -> ContractInfo | None:
        if not contract_hash:
            return None
        if contract_hash not in wanted:
            chain = registry_repo.contract_ancestry(session=session, content_hash=contract_hash)
            for row in reversed(chain):
                rows[row.hash] = row
                wanted.setdefault(row.hash, ContractInfo(hash=row.hash, ref=f"{row.name}@{row.revision}"))
            if contract_hash not in wanted:
                wanted[contract_hash] = ContractInfo(hash=contract_hash, ref=contract_hash[:12])
        return wanted[contract_hash]

    for g in generations:
        if (info := visit(g.contract_hash)) is not None:
            info.generations.append(g.index)
    for job in jobs:
        for cand in candidates[job.id]:
            if (info := visit(cand.contract_hash)) is not None:
                info.candidate_of.append(job.generation_index)
    for t in trials:
        if _is_model(t):
            visit(t.contract_hash)
    for info in wanted.values():
        row = rows.get(info.hash)
        if row is None:
            continue
        info.edit = row.edit
        info.parent_hash = row.parent_hash
        parent = rows.get(row.parent_hash) if row.parent_hash else None
        info.parent_ref = f"{parent.name}@{parent.revision}" if parent else None
        info.diff = _diff(parent, row) if parent else ""
        # a candidate's edits count from the contract of the generation that searched it
        stop = by_index.get(min(info.candidate_of)) if info.candidate_of else None
        info.chain = _chain(row, rows, stop)
    return list(wanted.values())


def _chain(row: Contract, rows: dict[str, Contract], stop: str | None) -> list[str]:
    """Edits from ``stop`` (or the root) down to ``row``."""
    edits: list[str] = []
    current: Contract | None = row
    while current is not None and current.hash != stop and current.parent_hash:
        edits.append(current.edit)
        current = rows.get(current.parent_hash)
    return edits[::-1]


def _diff(parent: Contract, child: Contract) -> str:
    """The key-path diff of two registered contracts (a text diff when one does not parse)."""
    try:
        a = loads_contract(parent.toml_text, f"{parent.name}@{parent.revision}")
        b = loads_contract(child.toml_text, f"{child.name}@{child.revision}")
        return format_diff(diff_contracts(a, b, include_identity=False))
    except Exception:  # noqa: BLE001 - a stored file that no longer parses still gets a diff
        lines = difflib.unified_diff(
            parent.toml_text.splitlines(), child.toml_text.splitlines(), "parent", "child", lineterm="", n=0
        )
        return "\n".join(line for line in lines if not line.startswith(("---", "+++")))
