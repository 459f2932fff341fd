"""Inputs of this instance: files under /app/files (and the truth the verifier checks)."""
import hashlib
import random
import sys
from pathlib import Path

SEED = %%seed
FILES = %%files
SUBFOLDERS = "%%{subfolders}" == "true"
ALGORITHM = "%%algorithm"
WORDS = ["alpha", "bravo", "delta", "echo", "golf", "kilo", "lima", "oscar", "papa", "romeo", "tango"]


def contents():
    """relative path -> bytes"""
    rng = random.Random(SEED)
    out = {}
    for i in range(FILES):
        folder = rng.choice(["", "docs/", "data/", "data/raw/"]) if SUBFOLDERS else ""
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40))) + "\n"
        out[f"{folder}{rng.choice(WORDS)}_{i:02d}.txt"] = text.encode()
    return out


def expected():
    """(digest, relative path) pairs the manifest must list."""
    return sorted((hashlib.new(ALGORITHM, data).hexdigest(), rel) for rel, data in contents().items())


def generate(root):
    base = Path(root) / "files"
    for rel, data in contents().items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


if __name__ == "__main__":
    generate(sys.argv[1])
