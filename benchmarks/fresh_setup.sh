#!/usr/bin/env bash
# Time deploy/setup.sh as a fresh machine runs it: a copy of the committed tree (git archive
# HEAD) in a temporary folder, a new .venv, an empty pip cache (PIP_CACHE_DIR), so every
# wheel is downloaded and llama.cpp compiled. Prints setup.sh's per-step seconds and
# /usr/bin/time -v's figures (wall clock, user + system CPU seconds). Heavy: run it alone
# (flock /tmp/mf/heavy.lock on the shared machine); figures taken while other work uses the
# CPU are noisy in wall time, less so in CPU seconds.
#
#   bash benchmarks/fresh_setup.sh               # time a fresh install of HEAD
#   bash benchmarks/fresh_setup.sh --count-units # compile units of llama.cpp: default vs setup.sh's options
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d /tmp/mindforge-fresh.XXXXXX)"
trap 'rm -rf "$work"' EXIT
if [[ "${1:-}" == "--count-units" ]]; then
  pip="$(command -v .venv/bin/pip || command -v pip)"
  (cd "$work" && "$pip" download -q --no-deps --no-binary :all: "llama-cpp-python==0.3.36" -d . && tar xzf llama_cpp_python-0.3.36.tar.gz)
  src="$work/llama_cpp_python-0.3.36"
  # setup.sh's options, read from it
  opts="$(sed -n 's/^LLAMACPP_CMAKE_ARGS+\{0,1\}="\(.*\)"$/\1/p' deploy/setup.sh | tr '\n' ' ')"
  cmake -S "$src" -B "$work/default" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  # shellcheck disable=SC2086  # the options are separate words
  cmake -S "$src" -B "$work/setup" -G Ninja -DCMAKE_BUILD_TYPE=Release $opts >/dev/null
  for build in default setup; do
    echo "$build: $(ninja -C "$work/$build" -t commands | grep -c ' -c ') compile units"
  done
  echo "setup.sh options: $opts"
  exit 0
fi
git archive HEAD | tar -x -C "$work"
export PIP_CACHE_DIR="$work/pip-cache"
echo "fresh set-up of $(git rev-parse --short HEAD) in $work; load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -v bash "$work/deploy/setup.sh" 2>&1 | grep -E "^setup:|rror|Elapsed|User time|System time|Percent of CPU|Exit status"
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
