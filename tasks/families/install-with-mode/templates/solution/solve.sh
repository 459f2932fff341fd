#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
install -D -m %%{mode} -t /app/tools /app/staging/*
