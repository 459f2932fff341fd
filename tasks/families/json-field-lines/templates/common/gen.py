"""Inputs of this instance: /app/data/people.json (and the truth the verifier checks)."""
import json
import random
import sys
from pathlib import Path

SEED = %%seed
RECORDS = %%records
DEPTH = %%depth
FIELD = "%%field"
NAMES = ["ada", "brian", "chen", "dora", "emil", "fatima", "gus", "hana", "ivan", "jules", "kofi", "lena"]
CITIES = ["oslo", "lima", "pune", "kyiv", "turin", "quito", "hanoi", "perth", "cork", "dakar"]


def records():
    rng = random.Random(SEED)
    out = []
    for i in range(RECORDS):
        leaf = {"name": rng.choice(NAMES), "city": rng.choice(CITIES), "age": rng.randint(18, 90)}
        rec = {"id": i + 1}
        if DEPTH == 0:
            rec.update(leaf)
        elif DEPTH == 1:
            rec["profile"] = leaf
        else:
            rec["profile"] = {"contact": leaf, "active": rng.random() < 0.5}
        out.append(rec)
    return out


def expected():
    """The lines the output file must hold."""
    vals = []
    for rec in records():
        node = rec
        if DEPTH >= 1:
            node = node["profile"]
        if DEPTH == 2:
            node = node["contact"]
        vals.append(str(node[FIELD]))
    return vals


def generate(root):
    data = Path(root) / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "people.json").write_text(json.dumps(records(), indent=2) + "\n")


if __name__ == "__main__":
    generate(sys.argv[1])
