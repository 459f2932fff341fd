"""The experience library of ``bench_experience``: seeded from the search split, grown by one generation.

Built with the product's experience core (:mod:`mindforge.experience`): oracle candidates
from the search split's reference solutions (:func:`mindforge.experience.mine_solution`),
model candidates from passed search-split trials (:func:`mindforge.experience.mine_trial`),
each replayed with no model in fresh sandboxes and kept only if every replay passes
(:func:`mindforge.experience.replay.replay_entry`, after
:func:`mindforge.experience.plan_replays` sorted out the too long and the duplicates).
Only search-split tasks are mined; the sealed split is never read here.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from mindforge.experience import (
    DEFAULT_REPLAYS,
    ExperienceEntry,
    ExperienceSnapshot,
    Rejection,
    attach_snapshot,
    mine_solution,
    mine_trial,
    plan_replays,
)
from mindforge.experience.retrieval import ProvenanceFilter

SEARCH = "search"


class LibraryBuild:
    """A library snapshot and the candidates it turned away.

    Args:
        snapshot: the validated entries.
        rejections: every rejected candidate (too long, duplicate, failed, flaky).
    """

    def __init__(self, snapshot: ExperienceSnapshot, rejections: list[Rejection]) -> None:
        self.snapshot, self.rejections = snapshot, rejections

    def attach(self, contract: Any, *, k: int, provenance: ProvenanceFilter) -> Any:
        """A child of ``contract`` that retrieves ``k`` entries a task from this snapshot."""
        return attach_snapshot(
            contract, self.snapshot, k=k, provenance=provenance,
            revision=f"{contract.mindforge.revision}-x{self.snapshot.snapshot_id[:8]}-{provenance}",
        )  # fmt: skip

    def summary(self) -> str:
        """Entries by provenance and rejections by reason, in words."""
        counts = self.snapshot.counts()
        reasons = Counter(str(r.reason) for r in self.rejections)
        rejected = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "none"
        return f"{counts['oracle']} oracle + {counts['model']} model entries; rejected: {rejected}"


def _validate(
    runner: Any, candidates: list[ExperienceEntry], kept: list[ExperienceEntry], tasks: dict[str, Any], run_id: str
) -> tuple[list[ExperienceEntry], list[Rejection]]:
    """Replay the candidates worth replaying (in ``runner``'s thread pool); returns (kept, rejected)."""
    from mindforge.experience.replay import replay_entry

    plan = plan_replays(candidates, kept)

    def one(entry: ExperienceEntry) -> Any:
        return replay_entry(
            entry, tasks[entry.task_hash], runner.engine, artifact_root=runner.artifact_root, run_id=run_id,
            runs=DEFAULT_REPLAYS, image_map=runner.image_map,
        )  # fmt: skip

    verdicts = list(runner.pool.map(one, plan.to_replay))
    good = [v.entry for v in verdicts if v.kept]
    bad = [v.rejection for v in verdicts if v.rejection is not None]
    return good, [*plan.rejected, *bad]


def oracle_library(runner: Any, search_tasks: list[Any], lineage: str) -> LibraryBuild:
    """The library seeded with the search split's reference solutions, each validated by replay."""
    candidates = []
    for task in search_tasks:
        solve = Path(task.path) / "solution" / "solve.sh"
        if not solve.is_file():
            continue
        entry = mine_solution(
            task_id=task.id, task_hash=task.content_hash, instruction=task.instruction, solve_sh=solve,
            split=SEARCH, lineage=lineage,
        )  # fmt: skip
        if entry is not None:
            candidates.append(entry)
    by_hash = {t.content_hash: t for t in search_tasks}
    kept, rejected = _validate(runner, candidates, [], by_hash, run_id=f"{lineage}-replay-oracle")
    return LibraryBuild(ExperienceSnapshot(entries=tuple(kept)), rejected)


def grow_library(
    runner: Any, start: LibraryBuild, contract: Any, search_tasks: list[Any], attempts: int, lineage: str
) -> LibraryBuild:
    """One generation: ``contract`` runs on the search split, its passes are mined, replayed and added.

    Returns:
        the grown library (its rejections include the seed's).
    """
    from mindforge.agent.transcript import read_transcript

    jobs = [(t, contract, f"grow/{t.id}/{a}", a) for t in search_tasks for a in range(attempts)]
    records = runner.run(jobs, run_id=f"{lineage}-grow")
    print(f"  generation on the search split: {sum(r.passed for r in records)}/{len(records)} trials passed "
          f"on {len({r.task_hash for r in records if r.passed})} tasks", flush=True)  # fmt: skip
    by_hash = {t.content_hash: t for t in search_tasks}
    candidates = []
    for rec in records:
        path = rec.artifacts.get("transcript")
        if not rec.passed or not path or not Path(path).is_file():
            continue
        entry = mine_trial(
            trial_id=rec.trial_id, passed=rec.passed, task_id=rec.task_id, task_hash=rec.task_hash,
            instruction=by_hash[rec.task_hash].instruction, contract_hash=contract.content_hash, generation=0,
            events=read_transcript(Path(path)), split=SEARCH, lineage=lineage,
        )  # fmt: skip
        if entry is not None:
            candidates.append(entry)
    kept, rejected = _validate(
        runner, candidates, list(start.snapshot.entries), by_hash, run_id=f"{lineage}-replay-model"
    )
    return LibraryBuild(start.snapshot.with_entries(kept), [*start.rejections, *rejected])
