"""The worker builds its activities from the settings it is given, not from the process's defaults."""

from __future__ import annotations

from pathlib import Path

from mindforge.settings import Settings, get_settings
from workers.lineage_activities import LineageActivities
from workers.main import queue_activities


def test_activities_use_the_given_artifact_root(tmp_path, monkeypatch):
    # the process's own settings point elsewhere: only the given ones may count
    monkeypatch.setenv("MINDFORGE_DATA_DIR", str(tmp_path / "process-default"))
    get_settings.cache_clear()
    given = Settings(data_dir=tmp_path / "given", artifact_root=tmp_path / "given-artifacts")
    acts = LineageActivities(given.db_url)  # a real SQLite store
    try:
        by_queue = queue_activities(acts, given)
        owners = {fn.__self__ for fns in by_queue.values() for fn in fns}
        roots = {Path(o.artifact_root) for o in owners if hasattr(o, "artifact_root")}
        assert roots == {tmp_path / "given-artifacts"}
        # discovery, update and training activities are among them
        assert {type(o).__name__ for o in owners} >= {
            "DiscoveryActivities", "UpdateActivities", "TrainingActivities", "LineageActivities", "SearchActivities",
            "TrialActivities",
        }
        names = {queue: {(type(fn.__self__).__name__, fn.__name__) for fn in fns} for queue, fns in by_queue.items()}
        assert {("DiscoveryActivities", "propose"), ("DiscoveryActivities", "admit")} <= names["orchestration"]
        assert {("DiscoveryActivities", "check"), ("TrialActivities", "run_trials")} <= names["sandbox"]
        # the trials' Ray tasks get the given settings too
        sandboxes = [fn.__self__.sandbox for fn in by_queue["sandbox"] if hasattr(fn.__self__, "sandbox")]
        assert sandboxes and {Path(s.artifact_root) for s in sandboxes} == {tmp_path / "given-artifacts"}
        # trials run on the sandbox queue only (the orchestration worker has no Ray)
        assert ("TrialActivities", "run_trials") not in names["orchestration"]
    finally:
        acts.engine.dispose()
        get_settings.cache_clear()
