"""Verifier: exactly the large files, sorted."""
import sys
from pathlib import Path

sys.path.insert(0, "/tests")
import gen  # noqa: E402

out = Path("/app/large_files.txt")
if not out.is_file():
    sys.exit(f"missing {out}")
got = [line.strip() for line in out.read_text().splitlines() if line.strip()]
sys.exit(0 if got == gen.expected() else f"got {got}, want {gen.expected()}")
