#!/usr/bin/env bash
# Reference solution: valid backend, Python 3.11-compatible requirement, no unused
# dependency, a proper entry point, the real version attribute and the bundled data file.
set -euo pipefail
cat > /app/textstats/pyproject.toml <<'TOML'
[build-system]
requires = ["setuptools>=61", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "textstats"
dynamic = ["version"]
description = "Word statistics for plain-text files"
readme = "README.md"
requires-python = ">=3.9"
license = {text = "MIT"}
dependencies = []

[project.scripts]
textstats = "textstats.cli:main"

[tool.setuptools.dynamic]
version = {attr = "textstats.__version__"}

[tool.setuptools.packages.find]
where = ["src"]

[tool.setuptools.package-data]
textstats = ["data/*.txt"]
TOML
cd /tmp
pip install --no-index --no-build-isolation /app/textstats
