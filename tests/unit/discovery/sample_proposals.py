"""Fixed proposals for the Discovery tests: one per outcome the checks must tell apart.

Each is the JSON object a model would write for one task (the reply format of
``mindforge.discovery.proposal``). Dockerfiles only COPY onto the local base image, so
builds are light.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from mindforge.settings import REPO_ROOT

BASE = "mindforge/base:bookworm"
PYTEST_TEST_SH = (
    "#!/usr/bin/env bash\n"
    "mkdir -p /logs/verifier\n"
    "if PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -p no:cacheprovider /tests/test_outputs.py; then\n"
    "  echo 1 > /logs/verifier/reward.txt\n"
    "else\n"
    "  echo 0 > /logs/verifier/reward.txt\n"
    "fi\n"
)

#: valid: totals per region; the current pair (a scripted "finish at once") fails it
VALID: dict[str, Any] = {
    "task_id": "region-totals",
    "instruction": (
        "The file /app/data/sales.csv has a header row and the columns region,amount.\n"
        "Write /app/out/totals.csv with the header region,total and one row per region,\n"
        "sorted by region name, where total is the sum of that region's amounts with two decimals.\n"
    ),
    "category": "data-processing",
    "difficulty": "medium",
    "dockerfile": f"FROM {BASE}\nWORKDIR /app\nCOPY data/ /app/data/\n",
    "files": {"data/sales.csv": "region,amount\nnorth,10.5\nsouth,3\nnorth,2.25\neast,7\nsouth,0.75\n"},
    "test_sh": PYTEST_TEST_SH,
    "test_files": {
        "test_outputs.py": (
            "from pathlib import Path\n\n"
            "def test_totals():\n"
            "    lines = Path('/app/out/totals.csv').read_text().split()\n"
            "    assert lines == ['region,total', 'east,7.00', 'north,12.75', 'south,3.75']\n"
        )
    },
    "solve_sh": (
        "#!/usr/bin/env bash\nset -euo pipefail\nmkdir -p /app/out\npython3 - <<'PY'\n"
        "import csv, collections\n"
        "t = collections.defaultdict(float)\n"
        "for row in csv.DictReader(open('/app/data/sales.csv')):\n"
        "    t[row['region']] += float(row['amount'])\n"
        "with open('/app/out/totals.csv', 'w') as f:\n"
        "    f.write('region,total\\n')\n"
        "    for r in sorted(t):\n"
        "        f.write(f'{r},{t[r]:.2f}\\n')\n"
        "PY\n"
    ),
}

#: broken: the reference solution copies instead of reversing
BROKEN: dict[str, Any] = {
    "task_id": "reverse-poem-lines",
    "instruction": "Write the lines of /app/poem.txt in reverse order (last line first) to /app/reversed.txt.\n",
    "category": "text-processing",
    "difficulty": "easy",
    "dockerfile": f"FROM {BASE}\nWORKDIR /app\nCOPY poem.txt /app/poem.txt\n",
    "files": {"poem.txt": "roses are red\nviolets are blue\nsugar is sweet\n"},
    "test_sh": (
        "#!/usr/bin/env bash\nmkdir -p /logs/verifier\n"
        "if [ \"$(head -n1 /app/reversed.txt 2>/dev/null)\" = 'sugar is sweet' ]; then echo 1; else echo 0; fi"
        " > /logs/verifier/reward.txt\n"
    ),
    "test_files": {},
    "solve_sh": "#!/usr/bin/env bash\ncp /app/poem.txt /app/reversed.txt\n",
}

#: trivially passing: the tests only check something the image already has
TRIVIAL: dict[str, Any] = {
    "task_id": "archive-old-logs",
    "instruction": "Move every file under /app/logs older than seven days into /app/archive/ and keep the rest.\n",
    "category": "file-operations",
    "difficulty": "easy",
    "dockerfile": f"FROM {BASE}\nWORKDIR /app\nCOPY logs/ /app/logs/\n",
    "files": {"logs/app.log": "started\n"},
    "test_sh": (
        "#!/usr/bin/env bash\nmkdir -p /logs/verifier\n"
        "if [ -d /app/logs ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
    ),
    "test_files": {},
    "solve_sh": "#!/usr/bin/env bash\nmkdir -p /app/archive\n",
}

#: tests that read the reference solution's files
READS_SOLUTION: dict[str, Any] = {
    "task_id": "uppercase-names",
    "instruction": "Write the names in /app/names.txt in upper case, one per line, to /app/upper.txt.\n",
    "category": "text-processing",
    "difficulty": "easy",
    "dockerfile": f"FROM {BASE}\nWORKDIR /app\nCOPY names.txt /app/names.txt\n",
    "files": {"names.txt": "ada\ngrace\n"},
    "test_sh": (
        "#!/usr/bin/env bash\nmkdir -p /logs/verifier\n"
        "bash /solution/solve.sh >/dev/null 2>&1\n"
        "if cmp -s /app/upper.txt /tmp/expected.txt; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
    ),
    "test_files": {},
    "solve_sh": "#!/usr/bin/env bash\ntr a-z A-Z < /app/names.txt > /app/upper.txt\n",
}

#: solved by the scripted pair on every attempt (its instruction carries MARKER)
TOO_EASY_MARKER = "TOO-EASY-MARKER"
TOO_EASY: dict[str, Any] = {
    "task_id": "touch-ready-flag",
    "instruction": f"Create an empty file /app/ready.flag ({TOO_EASY_MARKER}).\n",
    "category": "file-operations",
    "difficulty": "easy",
    "dockerfile": f"FROM {BASE}\nWORKDIR /app\n",
    "files": {},
    "test_sh": (
        "#!/usr/bin/env bash\nmkdir -p /logs/verifier\n"
        "if [ -f /app/ready.flag ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
    ),
    "test_files": {},
    "solve_sh": "#!/usr/bin/env bash\ntouch /app/ready.flag\n",
}

#: malformed: an environment file outside the build context
MALFORMED: dict[str, Any] = {**copy.deepcopy(VALID), "task_id": "escape-context", "files": {"../outside.txt": "x\n"}}


def near_duplicate() -> dict[str, Any]:
    """A proposal whose instruction is the bundled ``jsonl-to-csv`` one with a few words changed."""
    text = (REPO_ROOT / "tasks" / "jsonl-to-csv" / "instruction.md").read_text(encoding="utf-8")
    return {
        **copy.deepcopy(VALID),
        "task_id": "jsonl-records-to-csv",
        "instruction": text.replace("event export", "record export").replace("events.jsonl", "records.jsonl"),
        "test_files": {
            "test_outputs.py": (
                "from pathlib import Path\n\ndef test_csv():\n    assert Path('/app/out/records.csv').is_file()\n"
            )
        },
    }


def reply(*items: dict[str, Any]) -> str:
    """The reply text carrying ``items``."""
    return json.dumps({"tasks": list(items)})
