"""Verifier: the decoded text, or a one-line encoding, is right."""
import sys
from pathlib import Path

sys.path.insert(0, "/tests")
import gen  # noqa: E402

if gen.DIRECTION == "decode":
    out = Path("/app/payload.txt")
    ok = out.is_file() and out.read_text().rstrip("\n") == gen.text().rstrip("\n")
else:
    out = Path("/app/payload.b64")
    ok = out.is_file() and out.read_text().rstrip("\n") == gen.encoded()
sys.exit(0 if ok else f"{out} is missing or wrong")
