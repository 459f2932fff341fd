"""The cells of ``mindforge lineage status``'s table say what they mean in words."""

from __future__ import annotations

from typing import get_args

from mindforge.cli.lineage_status import _search_text
from mindforge.search.state import STOP_REASON_TEXT, StopReason, stop_reason_text


def test_every_stop_reason_has_words():
    assert set(STOP_REASON_TEXT) == set(get_args(StopReason))
    assert stop_reason_text("budget_attempts") == "stopped at its trial budget"
    assert stop_reason_text("a_newer_reason") == "a_newer_reason"  # shown as it is, never dropped
    assert stop_reason_text(None) == "no stop reason recorded"


def test_the_search_cell_ends_in_words_not_a_code():
    search = {
        "failing_tasks": 24, "covered": 1, "best_single": {"covered": 1},
        "spent": {"attempts": 48}, "stop_reason": "budget_attempts",
    }
    text = _search_text(search)
    assert text == "1/24 covered, best candidate in the run (not a sweep) 1; 48 trials, stopped at its trial budget"
    assert "budget_attempts" not in text
