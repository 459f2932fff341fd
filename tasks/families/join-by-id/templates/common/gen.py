"""Inputs of this instance: /app/names.csv and /app/scores.csv (and the truth the verifier checks)."""
import random
import sys
from pathlib import Path

SEED = %%seed
ROWS = %%rows
UNMATCHED = %%unmatched
NAMES = ["ada", "bo", "cy", "di", "ed", "flo", "gil", "hal", "ivy", "jo", "kai", "liv"]


def tables():
    rng = random.Random(SEED)
    ids = [f"u{n:03d}" for n in rng.sample(range(1, 999), ROWS + UNMATCHED)]
    names = {i: rng.choice(NAMES) for i in ids[:ROWS]}
    extra = ids[ROWS:]
    keep = ids[: ROWS - min(UNMATCHED, ROWS - 1)]
    scores = {i: rng.randint(0, 100) for i in keep + extra}
    return names, scores


def expected():
    names, scores = tables()
    return [f"{i},{names[i]},{scores[i]}" for i in sorted(set(names) & set(scores))]


def generate(root):
    names, scores = tables()
    n = list(names.items())
    s = list(scores.items())
    random.Random(SEED + 1).shuffle(s)
    (Path(root) / "names.csv").write_text("".join(f"{i},{v}\n" for i, v in n))
    (Path(root) / "scores.csv").write_text("".join(f"{i},{v}\n" for i, v in s))


if __name__ == "__main__":
    generate(sys.argv[1])
