"""The experience core: entries, mining, validation plans, snapshots and BM25 retrieval (pure, no sandbox)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindforge.errors import InputError
from mindforge.experience import (
    ExperienceSnapshot,
    Provenance,
    RejectionReason,
    SplitRefused,
    judge_replays,
    load_snapshot,
    mine_solution,
    mine_trial,
    normalise_command,
    plan_replays,
    replays_settled,
    retrieve,
    solution_commands,
    trial_commands,
)
from tests.unit.experience.helpers import LIBRARY, entry

SOLVE = """#!/usr/bin/env bash
# write the answer
set -euo pipefail
cd /app

wc -l < data.txt \\
  > count.txt
cat > notes.txt <<'END'
one
# not a comment
END
for f in a b; do
  touch "$f"
done
echo done  # trailing comment
"""


def test_solution_commands_drop_shebang_set_and_comments_and_keep_constructs_whole():
    commands = solution_commands(SOLVE)
    assert commands == [
        "cd /app",
        "wc -l < data.txt \\\n  > count.txt",
        "cat > notes.txt <<'END'\none\n# not a comment\nEND",
        'for f in a b; do\n  touch "$f"\ndone',
        "echo done  # trailing comment",
    ]


def test_mining_reads_only_the_search_split(tmp_path: Path):
    solve = tmp_path / "solve.sh"
    solve.write_text("#!/bin/bash\nset -e\necho 42 > /app/answer.txt\n")
    kw = {"task_id": "answer", "task_hash": "h-answer", "instruction": "Write 42.", "solve_sh": solve, "lineage": "l1"}
    mined = mine_solution(**kw, split="search")
    assert mined is not None and mined.commands == ["echo 42 > /app/answer.txt"]
    assert mined.provenance == Provenance.ORACLE and mined.trial_id == "oracle" and mined.split == "search"
    for split in ("selection", "sealed", None):
        with pytest.raises(SplitRefused, match=r"task answer.*'(selection|sealed|none)' split of lineage 'l1'"):
            mine_solution(**kw, split=split)
    events = [
        {"event": "action", "tool": "bash", "arguments": {"command": "ls"}},
        {"event": "observation", "exit_code": 0, "content": "a"},
    ]
    trial = {"trial_id": "t-1", "task_id": "answer", "task_hash": "h-answer", "instruction": "Write 42.",
             "contract_hash": "c" * 64, "generation": 0, "events": events, "lineage": "l1"}
    mined_trial = mine_trial(**trial, passed=True, split="search")
    assert mined_trial is not None and mined_trial.provenance == Provenance.MODEL and mined_trial.trial_id == "t-1"
    assert mine_trial(**trial, passed=False, split="search") is None  # failed trials are never mined
    with pytest.raises(SplitRefused):
        mine_trial(**trial, passed=True, split="sealed")


def test_trial_commands_keep_successful_bash_and_skip_other_tools():
    events = [
        {"event": "action", "tool": "bash", "arguments": {"command": "cat nope"}},
        {"event": "observation", "exit_code": 1},
        {"event": "action", "tool": "bash", "arguments": {"command": "echo hi > out.txt"}},
        {"event": "observation", "exit_code": 0},
        {"event": "action", "tool": "finish", "arguments": {}},
    ]
    assert trial_commands(events) == ["echo hi > out.txt"]
    assert trial_commands([{"event": "action", "tool": "write_file", "arguments": {}}]) is None


def test_entry_ids_are_content_hashes_and_normalisation_dedupes():
    a = entry("t", "Do it.", ["echo  hi ;"])
    b = entry("t", "Do it.", ["echo hi"])
    assert a.entry_id == b.entry_id and normalise_command("  echo \t hi ; ") == "echo hi"
    assert entry("u", "Do it.", ["echo hi"]).entry_id != a.entry_id  # another task, another entry


def test_plan_rejects_too_long_and_duplicates_before_any_replay():
    kept = [LIBRARY[0]]
    dup_of_kept = entry("other", "Count words.", ["wc -w <  essay.txt > words.txt"], validated=False)
    long_one = entry("long", "Many steps.", [f"echo {i}" for i in range(6)], validated=False)
    first = entry("x1", "A.", ["date > now.txt"], validated=False)
    second = entry("x2", "B.", ["date > now.txt;"], validated=False, provenance=Provenance.MODEL, trial="t-9")
    plan = plan_replays([second, long_one, dup_of_kept, first], kept)
    assert [e.entry_id for e in plan.to_replay] == [first.entry_id]  # oracle first; the model's copy is a dup
    reasons = {r.entry_id: r.reason for r in plan.rejected}
    assert reasons == {
        long_one.entry_id: RejectionReason.TOO_LONG,
        dup_of_kept.entry_id: RejectionReason.DUPLICATE,
        second.entry_id: RejectionReason.DUPLICATE,
    }


def test_judging_replays():
    assert judge_replays([1.0, 1.0]) is None
    assert judge_replays([1.0, 0.0]) == RejectionReason.FLAKY
    assert judge_replays([0.0, None]) == RejectionReason.FAILED
    assert replays_settled([1.0, 0.0], 12) and not replays_settled([1.0, 1.0], 12) and replays_settled([0.0, 0.0], 2)
    with pytest.raises(ValueError):
        judge_replays([])


def test_snapshot_is_content_addressed_and_refuses_unvalidated_entries():
    one = ExperienceSnapshot(entries=tuple(LIBRARY))
    two = ExperienceSnapshot(entries=tuple(reversed(LIBRARY)))
    assert one.snapshot_id == two.snapshot_id and len(one.snapshot_id) == 64
    assert load_snapshot(one.to_json()).snapshot_id == one.snapshot_id
    assert one.counts() == {"oracle": 3, "model": 1}
    assert ExperienceSnapshot(entries=tuple(LIBRARY[:3])).snapshot_id != one.snapshot_id
    with pytest.raises(ValueError, match="not validated"):
        ExperienceSnapshot(entries=(entry("t", "X.", ["true"], validated=False),))
    with pytest.raises(InputError, match="snap.json"):
        load_snapshot('{"entries": [{"entry_id": "nope"}]}', "snap.json")


def test_retrieval_is_deterministic_ranked_and_leaves_the_task_out():
    snapshot = ExperienceSnapshot(entries=tuple(LIBRARY))
    query = "Write the number of lines in rivers.txt to river_count.txt."
    first = retrieve(snapshot, query, k=2, task_id="rivers", task_hash="h-rivers")
    assert first[0].task_id == "count-lines"
    assert all(retrieve(snapshot, query, k=2, task_id="rivers", task_hash="h-rivers") == first for _ in range(3))
    # leave-one-out: on count-lines itself its own entry never comes back, matched by id or by hash
    for task_id, task_hash in (("count-lines", "other"), ("other", "h-count-lines")):
        shown = retrieve(snapshot, query, k=8, task_id=task_id, task_hash=task_hash)
        assert "count-lines" not in [e.task_id for e in shown] and len(shown) == 3
    assert retrieve(snapshot, query, k=0, task_id="x", task_hash="y") == []
    only_model = retrieve(snapshot, query, k=8, task_id="x", task_hash="y", provenance="model")
    assert [e.provenance for e in only_model] == [Provenance.MODEL]
    # no word in common: the k first by entry id
    none = retrieve(snapshot, "zzz", k=2, task_id="x", task_hash="y")
    assert [e.entry_id for e in none] == sorted(e.entry_id for e in LIBRARY)[:2]
