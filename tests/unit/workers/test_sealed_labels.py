"""Labels from provenance on a real SQLite store: restated pinned tasks read apart, copyable instances rechecked.

The pinned sealed tasks are the main job's 12 hand-written micro tasks; the search split
holds real instances of bundled families (``script-argstat``, ``json-field-lines``,
``split-by-lines``), rendered and written as task folders. The library grows through the
real activity (``grow_experience``'s mine, plan, fold and store; its Ray replays aside, their
verdicts written out as the Ray task returns them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindforge.cli.quickstart import SEALED_TASKS
from mindforge.discovery.families import load_families
from mindforge.discovery.materialise import materialise
from mindforge.evaluation import PoolSplit
from mindforge.evaluation.curriculum import ReadingsRecord, SealedOrigin, SealedReading
from mindforge.experience import EntryValidation
from mindforge.experience.mining import solution_commands
from mindforge.payloads import ExperienceRound, GrowExperienceInput, GrowExperienceResult, LineageSpec
from mindforge.reports.readings import readings_summary
from mindforge.store import LineageCreate, TaskSource, init_db, lineages, pool, session_scope, trials
from mindforge.tasks.loader import load_task
from mindforge.trials.record import TrialRecord
from mindforge.trials.replay import ReplayVerdict
from tests.conftest import REPO
from workers.experience_activities import ExperienceActivities
from workers.lineage_activities import StartingPool, readings_record
from workers.sealed_labels import current_readings, refresh_labels

MICRO = REPO / "tasks" / "micro"
#: the pinned tasks a mined family entry restates, and what restates them (the project's rule)
RESTATED = {
    "make-executable": "script-argstat", "private-key-mode": "script-argstat", "directory-mode": "script-argstat",
    "make-directory": "json-field-lines",
}
FAMILIES = ("script-argstat", "json-field-lines", "split-by-lines")
CONTRACT = "c0" * 32


def _instance(family: str, folder: Path, params: dict | None = None, task_id: str | None = None):
    fam = load_families(REPO / "tasks" / "families")[family]
    proposal = fam.render(params or fam.example)
    return load_task(materialise(proposal, folder, task_id=task_id, metadata={"family": family}))


def _pinned():
    return [load_task(MICRO / name) for name in SEALED_TASKS]


def test_at_lineage_start_the_search_splits_solutions_restate_four_pinned_tasks(tmp_path) -> None:
    pinned = _pinned()
    search = [_instance(f, tmp_path) for f in FAMILIES]

    class Drawn:  # the curriculum's record of an instance (family, id, level)
        def __init__(self, family: str, instance_id: str) -> None:
            self.family, self.instance_id, self.level = family, instance_id, "easy"

    assignment = {t.content_hash: PoolSplit.SEALED for t in pinned} | {t.content_hash: PoolSplit.SEARCH for t in search}
    instances = {t.content_hash: Drawn(f, t.id) for f, t in zip(FAMILIES, search, strict=True)}
    starting = StartingPool([*pinned, *search], assignment, instances, {t.content_hash for t in pinned})
    spec = LineageSpec(name="labels", tasks=[], contract_path="/c.toml", sealed_tasks=[str(t.path) for t in pinned])
    record = readings_record(spec, starting)
    names = {h: record.task_ids[h] for h in record.task_ids}
    assert {names[h] for h in record.tasks_of(SealedReading.RESTATED)} == set(RESTATED)
    assert {names[h] for h in record.tasks_of(SealedReading.TASKS)} == set(SEALED_TASKS) - set(RESTATED)
    assert set(record.origins.values()) == {SealedOrigin.PINNED}
    for task_hash, by in record.restated.items():
        assert any(RESTATED[names[task_hash]] in name and "reference solution" in name for name in by)
        assert record.moved_at[task_hash] == "lineage start"
    assert record.checks == ["lineage start"]


@pytest.fixture
def growing(tmp_path, settings):
    """A lineage with the 12 pinned tasks sealed and the three family instances on search, without their
    reference solutions (so only what the library mines can restate a pinned task)."""
    engine = init_db(f"sqlite:///{tmp_path / 'mindforge.db'}")
    search = [_instance(f, tmp_path / "search") for f in FAMILIES]
    solutions = {}
    for task in search:
        solve = task.path / "solution" / "solve.sh"
        solutions[task.content_hash] = solve.read_text(encoding="utf-8")
        solve.unlink()
    pinned = _pinned()
    spec = {"tasks": [], "sealed_tasks": [str(t.path) for t in pinned]}
    with session_scope(engine) as s:
        lineage = lineages.create_lineage(session=s, lineage_in=LineageCreate(name="labels", spec=spec))
        lineages.create_generation(session=s, lineage_id=lineage.id, index=0)
        for tasks, split, source in ((pinned, PoolSplit.SEALED, TaskSource.BUNDLED),
                                     (search, PoolSplit.SEARCH, TaskSource.FAMILY)):
            for task in tasks:
                pool.add_task(session=s, task=task, source=source)
                pool.add_to_pool(session=s, lineage_id=lineage.id, task_hash=task.content_hash, split=split,
                                 added_generation=0)
        lineage_id = lineage.id
    yield ExperienceActivities(engine, settings), engine, lineage_id, search, solutions
    engine.dispose()


def _passed(engine, lineage_id: str, task, commands: list[str], tmp: Path) -> None:
    """A passed expansion trial of ``task`` whose transcript ran ``commands``."""
    events = []
    for command in commands:
        events += [{"event": "action", "tool": "bash", "arguments": {"command": command}},
                   {"event": "observation", "exit_code": 0, "content": ""}]
    transcript = tmp / f"{task.id}.jsonl"
    transcript.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    record = TrialRecord(trial_id=f"t-{task.id}", run_id="labels/g0", task_id=task.id, task_hash=task.content_hash,
                         agent="model", contract_hash=CONTRACT, reward=1.0, artifacts={"transcript": str(transcript)})
    with session_scope(engine) as s:
        trials.insert_trial(session=s, record=record, lineage_id=lineage_id, generation_index=0, stage="expansion")


def test_a_library_growth_reads_restated_pinned_tasks_apart_and_names_them(growing, tmp_path) -> None:
    acts, engine, lineage_id, search, solutions = growing
    with session_scope(engine) as s:  # before the library holds anything: every pinned task is transfer
        before = refresh_labels(s, lineage_id, "lineage start")
    assert len(before.tasks_of(SealedReading.TASKS)) == 12 and not before.tasks_of(SealedReading.RESTATED)
    for task in search:  # the pair solved each family instance with its reference solution's commands
        _passed(engine, lineage_id, task, solution_commands(solutions[task.content_hash]), tmp_path)
    inp = GrowExperienceInput(lineage_id=lineage_id, generation=0, round=ExperienceRound.MODEL)
    planned = acts._plan(inp)
    assert not isinstance(planned, GrowExperienceResult) and len(planned.plan.to_replay) == 3
    planned.verdicts = [
        ReplayVerdict(entry=e.with_validation(EntryValidation(rewards=[1.0, 1.0])), kept=True)
        for e in planned.plan.to_replay
    ]
    acts._store(inp, planned)  # the library grew: the labels are checked in the same transaction
    with session_scope(engine) as s:
        after = current_readings(s, lineage_id)
        spec = dict(lineages.get_lineage(session=s, lineage_id=lineage_id).spec)
    names = after.task_ids
    assert {names[h] for h in after.tasks_of(SealedReading.RESTATED)} == set(RESTATED)
    # a pinned task no entry restates stays in the transfer reading
    assert {names[h] for h in after.tasks_of(SealedReading.TASKS)} == set(SEALED_TASKS) - set(RESTATED)
    for task_hash in after.tasks_of(SealedReading.RESTATED):
        assert all(name.startswith("library entry exp-") and "(model of " in name for name in after.restated[task_hash])
        assert any(RESTATED[names[task_hash]] in name for name in after.restated[task_hash])
        assert after.moved_at[task_hash] == "generation 0: experience model round"
    # the report names each restated task and what restates it
    summary = readings_summary(spec, 12)
    assert summary.tasks["restated"] == 4 and summary.tasks["tasks"] == 8
    assert set(summary.restated) == set(RESTATED)
    assert "restated tasks 4 tasks (directory-mode: library entry exp-" in summary.header()
    assert "[generation 0: experience model round]" in summary.restated["make-directory"]


def test_a_discovery_admission_with_a_sealed_instances_answer_makes_it_copyable(tmp_path) -> None:
    engine = init_db(f"sqlite:///{tmp_path / 'mindforge.db'}")
    sealed = _instance("script-argstat", tmp_path / "sealed", {"statistic": "sum", "negatives": False, "max_args": 4})
    sibling = _instance("script-argstat", tmp_path / "search", {"statistic": "max", "negatives": False, "max_args": 4})
    record = ReadingsRecord(
        training_families=["script-argstat"], readings={SealedReading.INSTANCES: [sealed.content_hash]},
        family_of={sealed.content_hash: "script-argstat", sibling.content_hash: "script-argstat"},
        origins={sealed.content_hash: SealedOrigin.FAMILY_INSTANCE}, task_ids={sealed.content_hash: sealed.id},
    )
    with session_scope(engine) as s:
        lineage = lineages.create_lineage(session=s, lineage_in=LineageCreate(
            name="copy", spec={"readings": record.model_dump(mode="json")}
        ))
        for task, split in ((sealed, PoolSplit.SEALED), (sibling, PoolSplit.SEARCH)):
            pool.add_task(session=s, task=task, source=TaskSource.FAMILY)
            pool.add_to_pool(session=s, lineage_id=lineage.id, task_hash=task.content_hash, split=split,
                             added_generation=0)
        first = refresh_labels(s, lineage.id, "lineage start")
    assert first.parts_of_instances()["needs_adaptation"] == {sealed.content_hash}  # the sibling's answer differs
    # Discovery admits a task worded otherwise whose reference solution is the sealed instance's, comments aside
    admitted = _instance("script-argstat", tmp_path / "discovered",
                         {"statistic": "sum", "negatives": True, "max_args": 9}, task_id="g1-argstat-sum")
    (admitted.path / "instruction.md").write_text("Write a script that adds up its integer arguments.\n")
    solve = sealed.path / "solution" / "solve.sh"
    (admitted.path / "solution" / "solve.sh").write_text(
        "#!/bin/bash\n# the discovered task's own wording\n" + solve.read_text(encoding="utf-8").replace("\n", "  \n")
    )
    admitted = load_task(admitted.path)
    with session_scope(engine) as s:
        pool.add_task(session=s, task=admitted, source=TaskSource.DISCOVERED)
        pool.add_to_pool(session=s, lineage_id=lineage.id, task_hash=admitted.content_hash, split=PoolSplit.SEARCH,
                         added_generation=1)
        after = refresh_labels(s, lineage.id, "generation 1: Discovery admission")
    assert after.parts_of_instances()["copyable"] == {sealed.content_hash}
    assert after.moved_at == {sealed.content_hash: "generation 1: Discovery admission"}
    assert after.checks == ["lineage start", "generation 1: Discovery admission"]
    engine.dispose()
