"""Output capping and the exec script's framing (pure; the script itself runs in tests/integration/test_sandbox.py)."""

from __future__ import annotations

import pytest

from mindforge.sandbox.output import (
    cap_bytes,
    join_capped,
    omitted_marker,
    parse_exec_output,
    split_budget,
)


def test_split_budget_sums_to_cap():
    assert split_budget(10) == (5, 5)
    assert split_budget(7) == (3, 4)
    assert split_budget(0) == (0, 0)
    with pytest.raises(ValueError):
        split_budget(-1)


def test_small_stream_kept_whole():
    cap = cap_bytes(b"hello\n", 100)
    assert (cap.text, cap.total_bytes, cap.omitted_bytes) == ("hello\n", 6, 0)


def test_large_stream_keeps_head_and_tail_with_marker():
    data = b"a" * 50 + b"b" * 900 + b"c" * 50
    cap = cap_bytes(data, 100)
    assert cap.total_bytes == 1000 and cap.omitted_bytes == 900
    assert cap.text == "a" * 50 + "\n" + omitted_marker(900) + "\n" + "c" * 50


def test_head_or_tail_truncation_keeps_one_end():
    assert split_budget(10, "head") == (10, 0) and split_budget(10, "tail") == (0, 10)
    with pytest.raises(ValueError, match="truncation must be one of"):
        split_budget(10, "middle")
    data = b"a" * 50 + b"b" * 900 + b"c" * 50
    head = cap_bytes(data, 100, "head")
    assert (head.text, head.omitted_bytes) == ("a" * 50 + "b" * 50 + "\n" + omitted_marker(900) + "\n", 900)
    tail = cap_bytes(data, 100, "tail")
    assert tail.text == omitted_marker(900) + "\n" + "b" * 50 + "c" * 50
    raw = b"MFEXEC1 0 1000 0\n" + data[-100:]  # what the exec script prints with head 0, tail 100
    parsed = parse_exec_output(raw, 0, 100)
    assert parsed is not None and parsed.stdout.text == tail.text


def test_invalid_utf8_replaced():
    cap = join_capped(b"\xff ok \xc3\xa9", b"", 7)
    assert cap.text == "\ufffd ok \u00e9"


def test_parse_frame_with_capped_stdout():
    head, tail = b"H" * 4, b"T" * 4
    raw = b"MFEXEC1 7 1000 3\n" + head + tail + b"err"
    parsed = parse_exec_output(raw, 4, 4)
    assert parsed is not None
    assert parsed.exit_code == 7 and not parsed.timed_out
    assert parsed.stdout.total_bytes == 1000 and parsed.stdout.omitted_bytes == 992
    assert parsed.stdout.text == "HHHH\n[... 992 bytes omitted ...]\nTTTT"
    assert parsed.stderr.text == "err" and parsed.stderr.omitted_bytes == 0


def test_parse_timeout_frame():
    parsed = parse_exec_output(b"MFEXEC1 timeout 2 0\nhi", 10, 10)
    assert parsed is not None
    assert parsed.timed_out and parsed.exit_code is None and parsed.stdout.text == "hi"


@pytest.mark.parametrize(
    "raw",
    [b"", b"OCI runtime exec failed: no such file\r\n", b"MFEXEC1 x 1 1\nab", b"MFEXEC1 0 1\na"],
)
def test_parse_rejects_output_without_a_header(raw):
    assert parse_exec_output(raw, 10, 10) is None
