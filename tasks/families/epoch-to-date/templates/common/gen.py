"""Inputs of this instance: /app/epochs.txt (and the truth the verifier checks)."""
import random
import sys
from datetime import datetime, timezone
from pathlib import Path

SEED = %%seed
COUNT = %%count
PATTERN = "%%pattern"
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def stamps():
    rng = random.Random(SEED)
    return [rng.randint(0, 2_000_000_000) for _ in range(COUNT)]


def expected():
    out = []
    for t in stamps():
        when = datetime.fromtimestamp(t, timezone.utc)
        out.append(when.strftime(PATTERN.replace("%A", WEEKDAYS[when.weekday()])))
    return out


def generate(root):
    (Path(root) / "epochs.txt").write_text("".join(f"{t}\n" for t in stamps()))


if __name__ == "__main__":
    generate(sys.argv[1])
