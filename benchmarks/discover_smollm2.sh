#!/usr/bin/env bash
# One Discovery run of SmolLM2-135M-Instruct on llama.cpp with family proposals:
# serves the bundled GGUF, runs `mindforge tasks discover` with hcp_contracts/smollm2.toml
# (discovery_mode = "families") on the bundled pool, and prints the CLI's table and counts.
# Heavy (the real model and Docker trials): run it under the shared lock, e.g.
#   flock /tmp/mf/heavy.lock timeout 600 benchmarks/discover_smollm2.sh
# Knobs: K (proposals, default 4), ATTEMPTS (pair trials per valid proposal, default 1),
# PORT (default 8765), OUT (default a fresh temp folder).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python}
K=${K:-4}
ATTEMPTS=${ATTEMPTS:-1}
PORT=${PORT:-8765}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
$PY -m mindforge.cli.main policy serve --model smollm2 --engine llamacpp --port "$PORT" \
  --served-model-name SmolLM2-135M-Instruct.Q4_1 > "$OUT/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -fsS "http://127.0.0.1:$PORT/health" > /dev/null 2>&1 && break
  sleep 1
done
start=$(date +%s)
COLUMNS=200 $PY -m mindforge.cli.main tasks discover --contract hcp_contracts/smollm2.toml --count "$K" \
  --attempts "$ATTEMPTS" --out "$OUT/tasks" --base-url "http://127.0.0.1:$PORT/v1"
echo "discovery wall time: $(( $(date +%s) - start )) s"
