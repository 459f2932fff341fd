#!/usr/bin/env bash
# Reference solution: a Python converter (Decimal for amounts, fromisoformat for timestamps).
set -euo pipefail
mkdir -p /app/out
python3 - <<'PY'
import csv
import json
from datetime import datetime, timezone
from decimal import ROUND_HALF_UP, Decimal

rows, rejected = {}, []
with open("/app/data/events.jsonl", encoding="utf-8") as fh:
    lines = fh.read().split("\n")
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
    when = (datetime.fromtimestamp(ts, timezone.utc) if isinstance(ts, int)
            else datetime.fromisoformat(ts).astimezone(timezone.utc))
    user = ev.get("user") or {}
    amount = (ev.get("props") or {}).get("amount")
    amount_text = "" if amount is None else str(
        Decimal(str(amount)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
    event_id = str(ev["id"])
    rows.pop(event_id, None)
    rows[event_id] = [
        event_id, when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "" if user.get("id") is None else str(user["id"]), user.get("name") or "",
        str(ev.get("type", "")).lower(), "|".join(dict.fromkeys(ev.get("tags") or [])), amount_text,
    ]
with open("/app/out/events.csv", "w", newline="", encoding="utf-8") as fh:
    writer = csv.writer(fh)
    writer.writerow(["event_id", "occurred_at", "user_id", "user_name", "type", "tags", "amount"])
    writer.writerows(sorted(rows.values(), key=lambda r: (r[1], r[0])))
with open("/app/out/rejected.txt", "w") as fh:
    fh.write("".join(f"{n}\n" for n in rejected))
PY
