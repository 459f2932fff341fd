"""Inputs of this instance: /app/bin/showenv (and the truth the verifier checks)."""
import sys
from pathlib import Path

MODE = "%%mode"
LEVEL = %%level
CLEAN = "%%clean" == "true"
INHERITED = {"APP_USER": "builder", "APP_CACHE": "/var/cache/app"}  # set by the image's ENV

SCRIPT = """#!/bin/sh
# prints the number of environment variables, then every APP_ variable, sorted
env | grep -c . | sed 's/^/count=/'
env | grep '^APP_' | LC_ALL=C sort
"""


def expected_app_lines():
    app = {"APP_MODE": MODE, "APP_LEVEL": str(LEVEL)}
    if not CLEAN:
        app.update(INHERITED)
    return [f"{k}={v}" for k, v in sorted(app.items())]


def generate(root):
    path = Path(root) / "bin" / "showenv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SCRIPT)
    path.chmod(0o755)


if __name__ == "__main__":
    generate(sys.argv[1])
