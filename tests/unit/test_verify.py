"""Reward parsing: a missing, non-numeric, NaN or out-of-range reward is a verifier error."""

import pytest

from mindforge.trials.verify import RewardError, parse_reward_json, parse_reward_txt


@pytest.mark.parametrize(("raw", "value"), [(b"1", 1.0), (b"0\n", 0.0), (b" 0.25 ", 0.25), (b"1.0", 1.0)])
def test_reward_txt_ok(raw, value):
    assert parse_reward_txt(raw) == value


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [(b"", "empty"), (b"yes", "not a number"), (b"nan", "nan"), (b"inf", "inf"), (b"1.5", "outside"), (b"-0.1", "outside")],
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
