"""Checks for jsonl-to-csv: events.csv and rejected.txt against a reference conversion.

The input is pinned by its sha256, so the reference (below) reads the same file the agent saw.
"""

import csv
import hashlib
import json
from datetime import datetime, timezone
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

SRC = Path("/app/data/events.jsonl")
OUT = Path("/app/out")
SRC_SHA256 = "3624a1179ab6bc27cafda835778aede2a61aec0b3d435396f69c12e617ccd4ce"
HEADER = ["event_id", "occurred_at", "user_id", "user_name", "type", "tags", "amount"]


def convert(lines):
    """Reference conversion: returns (rows without header, rejected line numbers)."""
    rows, rejected = {}, []
    for no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            ev = json.loads(line, parse_float=Decimal)
        except ValueError:
            rejected.append(no)
            continue
        if not isinstance(ev, dict) or "id" not in ev or "ts" not in ev:
            rejected.append(no)
            continue
        ts = ev["ts"]
        if isinstance(ts, int):
            when = datetime.fromtimestamp(ts, timezone.utc)
        else:
            when = datetime.fromisoformat(ts).astimezone(timezone.utc)
        user = ev.get("user") or {}
        tags = list(dict.fromkeys(ev.get("tags") or []))
        amount = (ev.get("props") or {}).get("amount")
        if amount is None:
            amount_text = ""
        else:
            amount_text = str(Decimal(str(amount)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
        event_id = str(ev["id"])
        rows.pop(event_id, None)
        rows[event_id] = [
            event_id,
            when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "" if user.get("id") is None else str(user["id"]),
            user.get("name") or "",
            str(ev.get("type", "")).lower(),
            "|".join(tags),
            amount_text,
        ]
    ordered = sorted(rows.values(), key=lambda r: (r[1], r[0]))
    return ordered, rejected


def expected():
    return convert(SRC.read_text(encoding="utf-8").split("\n"))


def read_csv():
    with open(OUT / "events.csv", newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def test_input_unchanged():
    assert hashlib.sha256(SRC.read_bytes()).hexdigest() == SRC_SHA256


def test_header():
    assert read_csv()[0] == HEADER


def test_rows_match_reference():
    rows, _ = expected()
    got = read_csv()[1:]
    assert len(got) == len(rows)
    for want, have in zip(rows, got):
        assert have == want


def test_rejected_lines():
    _, rejected = expected()
    text = (OUT / "rejected.txt").read_text()
    assert [int(x) for x in text.split()] == rejected
    assert rejected == [78, 121, 151, 152]
