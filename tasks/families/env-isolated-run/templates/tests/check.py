"""Verifier: the program's output shows the variables it was asked to see."""
import sys
from pathlib import Path

sys.path.insert(0, "/tests")
import gen  # noqa: E402

out = Path("/app/showenv.out")
if not out.is_file():
    sys.exit(f"missing {out}")
lines = [line.strip() for line in out.read_text().splitlines() if line.strip()]
if not lines or not lines[0].startswith("count="):
    sys.exit("not the output of /app/bin/showenv")
app = lines[1:]
ok = app == gen.expected_app_lines()
if gen.CLEAN:
    ok = ok and int(lines[0].split("=")[1]) <= 3  # the two variables (and at most PWD, which sh sets)
sys.exit(0 if ok else f"got {lines}, want {gen.expected_app_lines()}")
