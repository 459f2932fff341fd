"""``grow_experience`` on a real, migrated SQLite store, its Ray replays aside.

The mining, planning, folding and storing halves of the activity run here against real
stored pool tasks, trials and transcripts; the replay verdicts in between are written out
as the Ray task returns them (``ReplayVerdict``), one kept and one flaky. The replays
themselves run for real in tests/integration/test_experience_replay.py and the whole round
in tests/e2e/test_experience_lineage.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindforge.evaluation import PoolSplit
from mindforge.experience import EntryValidation, Provenance, RejectionReason
from mindforge.experience.validation import reject
from mindforge.payloads import ExperienceRound, ExperienceSpec, GrowExperienceInput, GrowExperienceResult
from mindforge.store import LineageCreate, TaskSource, init_db, lineages, pool, registry, session_scope, trials
from mindforge.store import experience as repo
from mindforge.tasks.loader import load_task
from mindforge.trials.record import TrialRecord
from mindforge.trials.replay import ReplayVerdict
from tests.conftest import FIXTURE_TASKS
from workers.experience_activities import ExperienceActivities

CONTRACT = "c0" * 32
SEARCH_TASK = "exp_answer"
SELECTION_TASK = "trivially_passing"


@pytest.fixture
def stored(tmp_path, settings):
    """A lineage with generation 0, ``exp_answer`` on the search split and ``trivially_passing`` on selection."""
    engine = init_db(f"sqlite:///{tmp_path / 'mindforge.db'}")
    tasks = {name: load_task(FIXTURE_TASKS / name) for name in (SEARCH_TASK, SELECTION_TASK)}
    with session_scope(engine) as s:
        lineage = lineages.create_lineage(session=s, lineage_in=LineageCreate(name="lib", spec={}))
        registry.register_contract(session=s, name="baseline", revision="1.0.0", content_hash=CONTRACT,
                                   toml_text='[mindforge]\nname = "baseline"\nrevision = "1.0.0"\n')
        lineages.create_generation(session=s, lineage_id=lineage.id, index=0, contract_hash=CONTRACT)
        for name, split in ((SEARCH_TASK, PoolSplit.SEARCH), (SELECTION_TASK, PoolSplit.SELECTION)):
            pool.add_task(session=s, task=tasks[name], source=TaskSource.BUNDLED)
            pool.add_to_pool(session=s, lineage_id=lineage.id, task_hash=tasks[name].content_hash, split=split,
                             added_generation=0)
        lineage_id = lineage.id
    yield ExperienceActivities(engine, settings), lineage_id, tasks, engine
    engine.dispose()


def _passed_trial(engine, lineage_id: str, task, stage: str, trial_id: str, commands: list[str], tmp: Path) -> None:
    """Store a passed model trial whose transcript ran ``commands`` (each exiting 0)."""
    events = []
    for command in commands:
        events.append({"event": "action", "tool": "bash", "arguments": {"command": command}})
        events.append({"event": "observation", "exit_code": 0, "content": ""})
    transcript = tmp / f"{trial_id}.jsonl"
    transcript.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    record = TrialRecord(trial_id=trial_id, run_id="lib/g0", task_id=task.id, task_hash=task.content_hash,
                         agent="model", contract_hash=CONTRACT, reward=1.0, artifacts={"transcript": str(transcript)})
    with session_scope(engine) as s:
        trials.insert_trial(session=s, record=record, lineage_id=lineage_id, generation_index=0, stage=stage)


def _record(engine, lineage_id: str) -> dict:
    with session_scope(engine) as s:
        return dict(lineages.get_generation(session=s, lineage_id=lineage_id, index=0).record)


def test_oracle_round_mines_the_search_split_stores_the_kept_entry_and_is_idempotent(stored) -> None:
    acts, lineage_id, tasks, engine = stored
    inp = GrowExperienceInput(lineage_id=lineage_id, generation=0, round=ExperienceRound.ORACLE)
    planned = acts._plan(inp)
    assert not isinstance(planned, GrowExperienceResult)
    assert [(e.task_id, e.provenance) for e in planned.plan.to_replay] == [(SEARCH_TASK, Provenance.ORACLE)]
    [candidate] = planned.plan.to_replay  # the selection task's solve.sh was not mined
    planned.verdicts = [ReplayVerdict(entry=candidate.with_validation(EntryValidation(rewards=[1.0, 1.0])), kept=True)]
    result = acts._store(inp, planned)
    assert (result.added, result.entries) == ({"oracle": 1, "model": 0}, {"oracle": 1, "model": 0})
    assert result.candidates == result.replayed == 1 and result.snapshot_id
    assert _record(engine, lineage_id)["experience"] == {"oracle": result.model_dump(mode="json")}
    with session_scope(engine) as s:
        latest = repo.latest_snapshot(session=s, lineage_id=lineage_id)
        assert latest is not None and latest.snapshot_id == result.snapshot_id
        assert [e.task_id for e in latest.entries] == [SEARCH_TASK]
    # a retried activity returns the stored report: nothing mined, replayed or counted again
    assert acts._plan(inp) == result
    assert acts._store(inp, planned) == result


def test_model_round_mines_passed_search_split_trials_only_and_records_rejections(stored, tmp_path) -> None:
    acts, lineage_id, tasks, engine = stored
    search, selection = tasks[SEARCH_TASK], tasks[SELECTION_TASK]
    _passed_trial(engine, lineage_id, search, "expansion", "t-exp", ["echo 144 > /app/answer.txt"], tmp_path)
    _passed_trial(engine, lineage_id, search, "search", "t-search", ["echo 144 > /app/answer.txt"], tmp_path)
    _passed_trial(engine, lineage_id, selection, "selection", "t-sel", ["true"], tmp_path)
    inp = GrowExperienceInput(lineage_id=lineage_id, generation=0, round=ExperienceRound.MODEL,
                              experience=ExperienceSpec(replays=3))
    planned = acts._plan(inp)
    assert not isinstance(planned, GrowExperienceResult)
    assert planned.candidates == 2  # the two search-split trials, not the selection one
    [candidate] = planned.plan.to_replay
    assert (candidate.trial_id, candidate.contract_hash, candidate.provenance) == ("t-exp", CONTRACT, Provenance.MODEL)
    assert [(r.trial_id, r.reason) for r in planned.plan.rejected] == [("t-search", RejectionReason.DUPLICATE)]
    flaky = reject(candidate, RejectionReason.FLAKY, "replay rewards 1, 0")
    planned.verdicts = [ReplayVerdict(entry=candidate, kept=False, rejection=flaky)]
    result = acts._store(inp, planned)
    assert result.added == {"oracle": 0, "model": 0} and result.snapshot_id == ""  # an empty library is not published
    assert result.rejected == {"failed": 0, "flaky": 1, "duplicate": 1, "too_long": 0}
    with session_scope(engine) as s:
        assert repo.rejection_counts(session=s, lineage_id=lineage_id, generation_index=0) == result.rejected
        assert repo.latest_snapshot(session=s, lineage_id=lineage_id) is None
    assert set(_record(engine, lineage_id)["experience"]) == {"model"}


def test_no_search_stage_trial_on_a_selection_task_reaches_mining(stored, tmp_path) -> None:
    """Two guards: the store refuses the trial (stage vs split), and mining gets each task's real split."""
    from mindforge.evaluation.stages import StageSplitError
    from mindforge.experience.mining import SplitRefused, check_search_split

    acts, lineage_id, tasks, engine = stored
    with pytest.raises(StageSplitError, match="runs on search tasks only"):
        _passed_trial(engine, lineage_id, tasks[SELECTION_TASK], "expansion", "t-leak", ["true"], tmp_path)
    with session_scope(engine) as s:
        split = acts_splits(s, lineage_id)[tasks[SELECTION_TASK].content_hash]
    with pytest.raises(SplitRefused, match="'selection' split"):
        check_search_split(SELECTION_TASK, split, lineage_id)


def acts_splits(session, lineage_id: str) -> dict[str, str]:
    from workers.experience_activities import _Tasks

    return _Tasks(session, lineage_id).splits
