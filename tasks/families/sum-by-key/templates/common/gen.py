"""Inputs of this instance: /app/sales.txt (and the truth the verifier checks)."""
import random
import sys
from pathlib import Path

SEED = %%seed
ROWS = %%rows
KEYS = %%keys
SEP = "%%sep"
REGIONS = ["north", "south", "east", "west", "central", "coast", "hills", "lakes", "plains"]


def rows():
    rng = random.Random(SEED)
    keys = rng.sample(REGIONS, KEYS)
    out = [(k, rng.randint(1, 500)) for k in keys]  # every key at least once
    out += [(rng.choice(keys), rng.randint(1, 500)) for _ in range(ROWS - KEYS)] if ROWS > KEYS else []
    rng.shuffle(out)
    return out


def expected():
    totals = {}
    for key, amount in rows():
        totals[key] = totals.get(key, 0) + amount
    return [f"{k} {totals[k]}" for k in sorted(totals)]


def generate(root):
    lines = [SEP.join(["region", "amount"])] + [SEP.join([k, str(a)]) for k, a in rows()]
    (Path(root) / "sales.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    generate(sys.argv[1])
