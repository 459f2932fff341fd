"""Reward parsing: a missing, non-numeric, NaN or out-of-range reward is a verifier error.

And a verifier the agent's leftover processes kept from running scores 0, not an error.
"""

import pytest

from mindforge.trials.record import FailureClass, LimitFired
from mindforge.trials.verify import (
    RewardError,
    VerifierResult,
    parse_reward_json,
    parse_reward_txt,
    score_pids_exhaustion,
)


@pytest.mark.parametrize(("raw", "value"), [(b"1", 1.0), (b"0\n", 0.0), (b" 0.25 ", 0.25), (b"1.0", 1.0)])
def test_reward_txt_ok(raw, value):
    assert parse_reward_txt(raw) == value


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"", "empty"), (b"yes", "not a number"), (b"nan", "nan"), (b"inf", "inf"),
        (b"1.5", "outside"), (b"-0.1", "outside"),
    ],
)
def test_reward_txt_errors(raw, fragment):
    with pytest.raises(RewardError, match=fragment):
        parse_reward_txt(raw)


def test_reward_json():
    assert parse_reward_json(b'{"reward": 0.5, "style": 1}') == (0.5, {"reward": 0.5, "style": 1.0})
    assert parse_reward_json(b'{"accuracy": 1}') == (1.0, {"accuracy": 1.0})


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"[1]", "object"),
        (b"{}", "object"),
        (b'{"a": 1, "b": 0}', "no 'reward'"),
        (b'{"reward": "1"}', "not a number"),
        (b'{"reward": 2}', "outside"),
        (b"{", "not valid JSON"),
    ],
)
def test_reward_json_errors(raw, fragment):
    with pytest.raises(RewardError, match=fragment):
        parse_reward_json(raw)


@pytest.mark.parametrize("cls", [FailureClass.VERIFIER_ERROR, FailureClass.VERIFIER_TIMEOUT])
def test_a_verifier_the_agents_processes_kept_from_running_scores_0(cls):
    """An agent that fills the pids limit does not escape its score as an unscored verifier error."""
    stuck = VerifierResult(
        failure_class=cls, detail="could not prepare /tests: exit 126; the sandbox's pids limit fired, 3 forks refused",
        limit_fired=LimitFired.PIDS_LIMIT,
    )
    scored = score_pids_exhaustion(stuck)
    assert scored.reward == 0.0 and scored.failure_class is None and scored.limit_fired is LimitFired.PIDS_LIMIT
    assert scored.detail.startswith(f"the verifier could not run ({cls.value}: ") and "3 forks refused" in scored.detail


@pytest.mark.parametrize(
    "result",
    [
        # a broken verifier with the pids limit not fired stays a verifier error (no reward)
        VerifierResult(failure_class=FailureClass.VERIFIER_ERROR, detail="wrote neither reward file"),
        VerifierResult(failure_class=FailureClass.VERIFIER_TIMEOUT, limit_fired=LimitFired.VERIFIER_TIMEOUT),
        # a verifier that ran keeps its reward, the pids evidence beside it
        VerifierResult(reward=0.0, limit_fired=LimitFired.PIDS_LIMIT, detail="the sandbox's pids limit fired"),
        VerifierResult(reward=1.0),
    ],
)
def test_other_verifier_results_are_kept(result):
    assert score_pids_exhaustion(result) == result
