"""Inputs of this instance: /app/journal.txt (and the truth the verifier checks)."""
import random
import string
import sys
from pathlib import Path

SEED = %%seed
LINES = %%lines
CHUNK = %%chunk
NUMERIC = "%%{numeric_suffixes}" == "true"


def lines():
    rng = random.Random(SEED)
    return [f"{i + 1:04d} " + "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 30)))
            for i in range(LINES)]


def suffix(n):
    if NUMERIC:
        return f"{n:02d}"
    return string.ascii_lowercase[n // 26] + string.ascii_lowercase[n % 26]


def expected():
    """piece name -> its text"""
    all_lines = lines()
    return {f"part_{suffix(i // CHUNK)}": "\n".join(all_lines[i:i + CHUNK]) + "\n" for i in range(0, LINES, CHUNK)}


def generate(root):
    (Path(root) / "journal.txt").write_text("\n".join(lines()) + "\n")


if __name__ == "__main__":
    generate(sys.argv[1])
