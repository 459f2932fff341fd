"""Checks for log-5xx-report: the top-5 server-error clients and the summary counts."""

import json
from pathlib import Path

REPORT = Path("/app/report")

# Ties at rank 5 (25 errors each) are broken by address byte order: 10.0.2.8 < 192.168.1.9.
EXPECTED_TOP = [
    "34 192.168.1.10",
    "28 10.0.2.77",
    "27 2001:db8::7",
    "26 172.16.5.4",
    "25 10.0.2.8",
]
EXPECTED_SUMMARY = {"requests": 2050, "server_errors": 284, "malformed": 29}


def test_top_5xx_exact():
    text = (REPORT / "top_5xx.txt").read_text()
    lines = [ln.rstrip("\r") for ln in text.splitlines()]
    while lines and lines[-1] == "":
        lines.pop()
    assert lines == EXPECTED_TOP


def test_summary_counts():
    data = json.loads((REPORT / "summary.json").read_text())
    assert isinstance(data, dict)
    assert set(data) == set(EXPECTED_SUMMARY)
    for key, value in EXPECTED_SUMMARY.items():
        assert type(data[key]) is int, key
        assert data[key] == value, key


def test_logs_untouched():
    names = sorted(p.name for p in Path("/app/logs").iterdir())
    assert names == ["access.log", "access.log.1", "access.log.2.gz"]
