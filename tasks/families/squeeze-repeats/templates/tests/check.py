"""Verifier: the copy has every run squeezed, the original is unchanged."""
import sys
from pathlib import Path

sys.path.insert(0, "/tests")
import gen  # noqa: E402

out, raw = Path("/app/clean.txt"), Path("/app/raw.txt")
if not out.is_file() or not raw.is_file():
    sys.exit("missing /app/clean.txt or /app/raw.txt")
if raw.read_text() != gen.text():
    sys.exit("/app/raw.txt was changed")
sys.exit(0 if out.read_text().rstrip("\n") == gen.expected().rstrip("\n") else "content differs")
