"""Inputs of this instance: /app/first.txt and /app/second.txt (and the truth the verifier checks)."""
import random
import sys
from pathlib import Path

SEED = %%seed
ITEMS = %%items
KEEP = "%%keep"
SYLLABLES = ["ka", "lo", "mi", "ne", "pu", "ra", "si", "to", "vu", "ze"]


def lists():
    rng = random.Random(SEED)
    words = set()
    while len(words) < 2 * ITEMS:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(3)))
    pool = sorted(words)
    rng.shuffle(pool)
    shared = pool[: max(1, ITEMS // 2)]
    first = shared + pool[len(shared): ITEMS]
    second = shared + pool[ITEMS: ITEMS + ITEMS - len(shared)]
    rng.shuffle(first)
    rng.shuffle(second)
    return first, second


def expected():
    first, second = map(set, lists())
    keep = {"both": first & second, "only_first": first - second, "only_second": second - first}[KEEP]
    return sorted(keep)


def generate(root):
    first, second = lists()
    (Path(root) / "first.txt").write_text("\n".join(first) + "\n")
    (Path(root) / "second.txt").write_text("\n".join(second) + "\n")


if __name__ == "__main__":
    generate(sys.argv[1])
