"""Verifier: the script runs on its own and prints the right number for each case."""
import os
import subprocess
import sys

sys.path.insert(0, "/tests")
import gen  # noqa: E402

script = "/app/argstat.sh"
if not os.access(script, os.X_OK):
    sys.exit(f"{script} missing or not executable")
for args, want in gen.cases():
    got = subprocess.run([script, *args], capture_output=True, text=True, timeout=10).stdout.strip()
    if got != want:
        sys.exit(f"{script} {' '.join(args)} printed {got!r}, want {want!r}")
sys.exit(0)
