#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
%%{command}
