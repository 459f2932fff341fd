"""Inputs of this instance: /app/raw.txt (and the truth the verifier checks)."""
import random
import re
import sys
from pathlib import Path

SEED = %%seed
LINES = %%lines
CHAR = "%%char"
LONGEST = %%longest_run
WORDS = ["amber", "basil", "cedar", "dune", "ember", "fjord", "grove", "heath", "inlet", "juniper"]


def text():
    rng = random.Random(SEED)
    out = []
    for i in range(LINES):
        words = [rng.choice(WORDS) for _ in range(rng.randint(2, 6))]
        runs = [CHAR * rng.randint(1, LONGEST) for _ in words[1:]]
        if i == 0:
            runs[0] = CHAR * LONGEST
        line = words[0] + "".join(r + w for r, w in zip(runs, words[1:]))
        out.append(line)
    return "\n".join(out) + "\n"


def expected():
    return re.sub(re.escape(CHAR) + "+", CHAR, text())


def generate(root):
    (Path(root) / "raw.txt").write_text(text())


if __name__ == "__main__":
    generate(sys.argv[1])
