"""Inputs of this instance: /app/payload.b64 or /app/payload.txt (and the truth the verifier checks)."""
import base64
import random
import sys
from pathlib import Path

SEED = %%seed
LINES = %%lines
DIRECTION = "%%direction"
WORDS = ["crate", "ledger", "parcel", "invoice", "pallet", "route", "depot", "manifest", "barcode"]


def text():
    rng = random.Random(SEED)
    rows = [f"{rng.choice(WORDS)} {rng.randint(100, 99999)} {rng.choice(WORDS)}" for _ in range(LINES)]
    return "\n".join(rows) + "\n"


def encoded():
    return base64.b64encode(text().encode()).decode()


def generate(root):
    root = Path(root)
    if DIRECTION == "decode":
        wrapped = "\n".join(encoded()[i:i + 76] for i in range(0, len(encoded()), 76))
        (root / "payload.b64").write_text(wrapped + "\n")
    else:
        (root / "payload.txt").write_text(text())


if __name__ == "__main__":
    generate(sys.argv[1])
