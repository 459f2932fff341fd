"""Inputs of this instance: files in /app/staging (and the truth the verifier checks)."""
import random
import sys
from pathlib import Path

SEED = %%seed
FILES = %%files
MODE = int("%%mode", 8)
TARGET_EXISTS = "%%{target_exists}" == "true"
STEMS = ["backup", "rotate", "notify", "deploy", "sync", "cleanup", "report", "archive"]


def contents():
    rng = random.Random(SEED)
    names = rng.sample(STEMS, min(FILES, len(STEMS))) + [f"task{i}" for i in range(max(0, FILES - len(STEMS)))]
    return {f"{n}.sh": f"#!/bin/sh\necho {n} {rng.randint(1, 999)}\n" for n in names}


def generate(root):
    staging = Path(root) / "staging"
    staging.mkdir(parents=True, exist_ok=True)
    for name, text in contents().items():
        (staging / name).write_text(text)
        (staging / name).chmod(0o664)
    if TARGET_EXISTS:
        (Path(root) / "tools").mkdir(exist_ok=True)


if __name__ == "__main__":
    generate(sys.argv[1])
