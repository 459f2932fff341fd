"""Inputs of this instance: files under /app/store (and the truth the verifier checks)."""
import random
import sys
from pathlib import Path

SEED = %%seed
FILES = %%files
LIMIT = %%limit_kib * 1024
DEPTH = %%depth
PARTS = ["img", "logs", "cache", "tmp", "old", "media"]


def sizes():
    """relative path -> size in bytes (never within 100 bytes of the limit)."""
    rng = random.Random(SEED)
    out = {}
    for i in range(FILES):
        folder = "/".join(rng.choice(PARTS) for _ in range(rng.randint(0, DEPTH)))
        big = i % 2 == 0 if i < 2 else rng.random() < 0.4
        size = rng.randint(LIMIT + 100, LIMIT * 3) if big else rng.randint(0, max(0, LIMIT - 100))
        out[(folder + "/" if folder else "") + f"f{i:02d}.bin"] = size
    return out


def expected():
    return sorted(f"/app/store/{rel}" for rel, size in sizes().items() if size > LIMIT)


def generate(root):
    for rel, size in sizes().items():
        path = Path(root) / "store" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)


if __name__ == "__main__":
    generate(sys.argv[1])
