"""Verifier: the output file holds the expected values, one a line."""
import sys
from pathlib import Path

sys.path.insert(0, "/tests")
import gen  # noqa: E402

out = Path("/app/out/%%{field}.txt")
if not out.is_file():
    sys.exit(f"missing {out}")
got = [line.strip() for line in out.read_text().splitlines() if line.strip()]
want = gen.expected()
sys.exit(0 if got == want else f"got {got[:5]}..., want {want[:5]}...")
