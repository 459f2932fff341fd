"""Saved workflow histories for the replay test (determinism guard).

Each e2e test that drives one of the workflows through a path no other test covers
saves the histories listed here when run with ``MINDFORGE_SAVE_HISTORIES=1``;
``test_replay_saved_histories`` replays every one of them against the current code.
"""

from __future__ import annotations

import os
from pathlib import Path

HISTORY_DIR = Path(__file__).parent / "histories"

#: workflow ids saved, by the test that records them
HISTORIES = {
    # lineage -> generation -> expansion, search off (test_lineage.test_two_generation_lineage)
    "two-gens": ["lineage-two-gens", "two-gens-gen-0", "two-gens-gen-0-expansion"],
    # expansion with audit, the search loop and the successor check (test_search_lineage)
    "search": ["search-gen-0-expansion"],
    # discovery: propose -> validate on Ray -> admit (test_discovery_lineage)
    "disc": ["disc-gen-0", "disc-gen-0-discovery"],
    # update: selection, training, validation, hand-off, held-out lift (test_update, two generations)
    "upd2": ["upd2-gen-1-update"],
    # update: two on-policy GRPO iterations with redraws (test_update_iterations)
    "iter": ["iter-gen-0-update"],
}


def expected_files() -> list[Path]:
    """Every history file the replay test expects, sorted."""
    return sorted(HISTORY_DIR / f"{wid}.json" for ids in HISTORIES.values() for wid in ids)


async def save_histories(env, lineage: str) -> None:
    """Write the histories of ``lineage``'s listed workflows when ``MINDFORGE_SAVE_HISTORIES`` is set.

    Args:
        env: the Temporal test environment whose client ran the lineage.
        lineage: a key of :data:`HISTORIES`.
    """
    if not os.environ.get("MINDFORGE_SAVE_HISTORIES"):
        return
    HISTORY_DIR.mkdir(exist_ok=True)
    for wid in HISTORIES[lineage]:
        history = await env.client.get_workflow_handle(wid).fetch_history()
        (HISTORY_DIR / f"{wid}.json").write_text(history.to_json())
