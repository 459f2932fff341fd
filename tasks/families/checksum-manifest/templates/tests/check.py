"""Verifier: the manifest lists every file with its digest."""
import sys
from pathlib import Path

sys.path.insert(0, "/tests")
import gen  # noqa: E402

out = Path("/app/MANIFEST.%%{algorithm}")
if not out.is_file():
    sys.exit(f"missing {out}")
got = []
for line in out.read_text().splitlines():
    if line.strip():
        digest, _, rel = line.partition("  ")
        got.append((digest.strip(), rel.strip().removeprefix("./").lstrip("*")))
sys.exit(0 if sorted(got) == gen.expected() else f"got {sorted(got)[:3]}, want {gen.expected()[:3]}")
