#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
env %%{envopt}APP_MODE=%%{mode} APP_LEVEL=%%{level} /app/bin/showenv > /app/showenv.out
