#!/usr/bin/env bash
# Reference solution: parse every log (gzip or not) with one strict regex.
set -euo pipefail
mkdir -p /app/report
python3 - <<'PY'
import collections, gzip, json, re
from pathlib import Path

Q = r'"(?:[^"\\]|\\.)*"'
LINE = re.compile(r'^(\S+) \S+ \S+ \[[^\]]+\] ' + Q + r' (\d{3}) (?:\d+|-) ' + Q + ' ' + Q + r'$')
errors = collections.Counter()
requests = server_errors = malformed = 0
for path in sorted(Path("/app/logs").glob("access.log*")):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        for raw in fh:
            line = raw.rstrip("\n")
            if not line.strip():
                continue
            m = LINE.match(line)
            if not m:
                malformed += 1
                continue
            requests += 1
            if m.group(2).startswith("5"):
                server_errors += 1
                errors[m.group(1)] += 1
top = sorted(errors.items(), key=lambda kv: (-kv[1], kv[0].encode()))[:5]
Path("/app/report/top_5xx.txt").write_text("".join(f"{n} {ip}\n" for ip, n in top))
Path("/app/report/summary.json").write_text(json.dumps(
    {"requests": requests, "server_errors": server_errors, "malformed": malformed}) + "\n")
PY
