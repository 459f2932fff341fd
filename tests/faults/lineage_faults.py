"""A short lineage to inject faults into, and the counts every fault test checks.

The lineage is Expansion only, on three bundled tasks, with the SCRIPTED POLICY behind
the real OpenAI-compatible HTTP API (the one allowed double) served by a child process
(:class:`~mindforge.policy.server.runner.PolicyServerProcess`), so a test can SIGKILL it;
Temporal, Ray, Docker and SQLite are real. :func:`fault_counts` reads what the store
holds afterwards: every planned trial stored once, none scored from a fault.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import docker
import httpx

from mindforge.evaluation import SplitConfig
from mindforge.payloads import (
    ORCHESTRATION_QUEUE,
    EvaluationSpec,
    ExpansionSpec,
    LineageInput,
    LineageSpec,
    RuntimeSpec,
    SearchBudgetSpec,
    Stage,
)
from mindforge.sandbox.owner import MANAGED, RUN_ID
from mindforge.store import engine as se
from mindforge.store import lineages, trials
from mindforge.store.infra_attempts import list_infra_attempts
from mindforge.trials.record import RETRYABLE_INFRA_CLASSES
from tests.conftest import BUNDLED_TASKS, REPO

TASKS = ["log-5xx-report", "fix-invoice-totals", "c-stats-make"]
CONTRACT = REPO / "hcp_contracts" / "baseline.toml"


def slow_finish_script(model_id: str, delay_sec: float) -> dict:
    """A script whose every reply is ``finish`` after ``delay_sec`` seconds (trials stay in flight)."""
    finish = json.dumps({"tool": "finish", "arguments": {}})
    return {"rules": [], "default": {"content": finish, "delay_sec": delay_sec}, "base_models": [model_id]}


async def wait_for_requests(base_url: str, count: int) -> None:
    """Wait until the scripted policy at ``base_url`` has answered ``count`` chat requests."""
    async with httpx.AsyncClient() as http:
        while len((await http.get(f"{base_url}/scripted/requests", timeout=5)).json()) < count:
            await asyncio.sleep(0.2)


@dataclass
class Reads:
    """What :func:`read_while_written` saw: each command line with its exit status and problem, if any."""

    done: list[tuple[str, int, str]]

    @property
    def failed(self) -> list[tuple[str, int, str]]:
        """The reads that exited non-zero or printed something that is not one whole JSON document."""
        return [r for r in self.done if r[1] != 0 or r[2]]


async def read_while_written(name: str, stop: asyncio.Event, reads: Reads) -> None:
    """Run ``mindforge lineage status NAME --json`` and ``mindforge report NAME -f json`` in rounds until ``stop``.

    The two run side by side in each round, each a separate process as a user's would
    be, reading the store the lineage's workers write (SQLite in WAL mode). A read must
    exit 0 and print one whole JSON document. The first round starts at once, so both
    commands read while the lineage writes however slowly a loaded machine starts them;
    a round under way when ``stop`` is set finishes.
    """
    cli = [sys.executable, "-m", "mindforge.cli.main"]
    commands = [["lineage", "status", name, "--json"], ["report", name, "-f", "json"]]

    async def read(args: list[str]) -> None:
        proc = await asyncio.create_subprocess_exec(
            *cli, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ}
        )
        out, err = await proc.communicate()
        problem = ""
        try:
            json.loads(out)
        except ValueError as exc:
            problem = f"not JSON ({exc}); stderr: {err.decode(errors='replace')[-300:]}"
        reads.done.append((" ".join(args), proc.returncode or 0, problem))

    while True:
        await asyncio.gather(*(read(args) for args in commands))
        if stop.is_set():
            return


async def run_with_fault(
    env,
    settings,
    spec: LineageSpec,
    fault: Coroutine[Any, Any, None],
    *,
    worker_settings=None,
    wait: Callable[[Any], Awaitable[None]] | None = None,
    timeout_sec: float = 400,
) -> None:
    """Run ``spec``'s lineage on in-process workers with ``fault`` running beside it.

    Args:
        env: the Temporal test environment (``temporal_env``'s first item).
        settings: the test settings (the store).
        spec: the lineage (:func:`fault_spec`).
        fault: the injection, started as a task once the lineage has started; awaited
            after the lineage ends (cancelled if the lineage fails first).
        worker_settings: the workers' settings when they differ (another artifact root).
        wait: how to wait for the lineage, given its workflow handle (default: its result).
        timeout_sec: how long the lineage may take, seconds.
    """
    from workers.lineage_activities import LineageActivities
    from workers.main import build_workers
    from workflows.options import search_attributes

    acts = LineageActivities(settings.db_url)
    queues = ["orchestration", "sandbox"]
    w_orch, w_sand = build_workers(env.client, acts, queues, 5, settings=worker_settings or settings)
    async with w_orch, w_sand:
        handle = await env.client.start_workflow(
            "LineageWorkflow", LineageInput(lineage_id=spec.name, spec=spec), id=f"lineage-{spec.name}",
            task_queue=ORCHESTRATION_QUEUE, search_attributes=search_attributes(spec.name),
        )
        injected = asyncio.create_task(fault)
        try:
            await asyncio.wait_for(wait(handle) if wait else handle.result(), timeout_sec)
        except BaseException:
            injected.cancel()
            raise
        await injected


def fault_spec(name: str, policy_url: str, contract: Path = CONTRACT, attempts: int = 2) -> LineageSpec:
    """One generation of Expansion (no search, no splits) on :data:`TASKS`, ``attempts`` trials each."""
    return LineageSpec(
        name=name,
        tasks=[str(BUNDLED_TASKS / t) for t in TASKS],
        contract_path=str(contract),
        generations=1,
        stages=[Stage.EXPANSION],
        runtime=RuntimeSpec(policy_url=policy_url, trial_batch_size=len(TASKS) * attempts, heartbeat_timeout_sec=20),
        expansion=ExpansionSpec(attempts=attempts, search=SearchBudgetSpec(enabled=False)),
        evaluation=EvaluationSpec(splits=SplitConfig(selection_fraction=0.0, sealed_fraction=0.0, min_tasks=1)),
    )


#: seeds of the fault points, comma-separated (``benchmarks/bench_faults.py`` sets several)
SEEDS_ENV = "MINDFORGE_FAULT_SEEDS"
#: a JSON-lines file each fault test appends its counts to, when set
RESULTS_ENV = "MINDFORGE_FAULT_RESULTS"


def fault_seeds() -> list[int]:
    """The seeds to inject each fault at: ``$MINDFORGE_FAULT_SEEDS`` (e.g. ``0,1,2,3,4``), default ``[0]``."""
    raw = os.environ.get(SEEDS_ENV, "0")
    return [int(part) for part in raw.split(",") if part.strip()]


def record_result(fault: str, seed: int, counts: FaultCounts | None, recovery_sec: float | None) -> None:
    """Append one injection's outcome to ``$MINDFORGE_FAULT_RESULTS`` (nothing when it is unset)."""
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    line = {"fault": fault, "seed": seed, "recovery_sec": recovery_sec, **(asdict(counts) if counts else {})}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def orphans(lineage_id: str) -> int:
    """Containers with MindForge's label of one of ``lineage_id``'s runs that are still on the engine."""
    found = docker.from_env().containers.list(all=True, filters={"label": f"{MANAGED}=true"})
    return sum(1 for c in found if (c.labels.get(RUN_ID) or "").startswith(f"{lineage_id}/"))


def recovery_sec(settings, lineage_id: str, injected_at: datetime) -> float | None:
    """Seconds from the fault until the last trial it hit was stored whole (None: it hit none).

    The trials it hit are those with an infrastructure attempt; each is whole again when
    its row in ``trials`` (from the clean rerun) is stored.
    """
    with se.session_scope(se.init_db(settings.db_url)) as s:
        hit = {f.trial_id for f in list_infra_attempts(session=s, lineage_id=lineage_id)}
        rows = [r for r in trials.list_trials(session=s, lineage_id=lineage_id) if r.trial_id in hit]
        if not rows:
            return None
        return (max(r.created_at for r in rows) - injected_at).total_seconds()


@dataclass
class FaultCounts:
    """What a faulted lineage left in the store.

    Attributes:
        status: the lineage's status.
        planned: trials the lineage planned (tasks x attempts).
        stored: trial rows stored; ``lost`` = planned ids with no row.
        double_counted: rows beyond one per planned trial id.
        infra_scored: rows with a fault class and a reward (a fault scored as the model's).
        infra_unscored: rows that kept a fault class with no reward (the reruns ran out).
        faults_recorded: infrastructure attempts stored (fault-ended runs, run again).
        orphans: sandbox containers of the lineage left on the engine.
    """

    status: str | None
    planned: int
    stored: int
    lost: int
    double_counted: int
    infra_scored: int
    infra_unscored: int
    faults_recorded: int
    orphans: int


def fault_counts(settings, lineage_id: str, planned: int) -> FaultCounts:
    """Count what the store holds for ``lineage_id`` (see :class:`FaultCounts`)."""
    with se.session_scope(se.init_db(settings.db_url)) as s:
        rows = [r.to_record() for r in trials.list_trials(session=s, lineage_id=lineage_id)]
        faults = list_infra_attempts(session=s, lineage_id=lineage_id)
        lin = lineages.get_lineage(session=s, lineage_id=lineage_id)
        status = str(lin.status) if lin else None
    ids = [r.trial_id for r in rows]
    return FaultCounts(
        status=status,
        planned=planned,
        stored=len(rows),
        lost=max(0, planned - len(set(ids))),
        double_counted=len(ids) - len(set(ids)),
        infra_scored=sum(1 for r in rows if r.failure_class in RETRYABLE_INFRA_CLASSES and r.reward is not None),
        infra_unscored=sum(1 for r in rows if r.failure_class in RETRYABLE_INFRA_CLASSES and r.reward is None),
        faults_recorded=len(faults),
        orphans=orphans(lineage_id),
    )


def assert_nothing_lost(counts: FaultCounts) -> None:
    """The targets every trial-running fault must meet: completed, every planned trial stored
    once, none lost or double-counted, no fault scored or left unscored, no orphan sandbox."""
    assert counts.status == "completed"
    assert (counts.lost, counts.double_counted, counts.infra_scored, counts.infra_unscored, counts.orphans) == (
        0, 0, 0, 0, 0
    ), counts
    assert counts.stored == counts.planned
