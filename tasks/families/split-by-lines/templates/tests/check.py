"""Verifier: the pieces hold the lines in order, named as asked."""
import sys
from pathlib import Path

sys.path.insert(0, "/tests")
import gen  # noqa: E402

parts = Path("/app/parts")
if not parts.is_dir() or not Path("/app/journal.txt").is_file():
    sys.exit("missing /app/parts or /app/journal.txt")
got = {p.name: p.read_text() for p in parts.iterdir() if p.is_file()}
names = sorted(p.name for p in parts.iterdir())
ok = names == sorted(gen.expected()) and got == gen.expected()
sys.exit(0 if ok else f"got {names}, want {sorted(gen.expected())}")
