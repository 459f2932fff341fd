#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
chmod go-w /app/shared/*
