#!/usr/bin/env bash
# Run THERE (the GPU machine): builds gradd against the packages that
# scripts/gpu_deps.sh unpacked into .deps/root and the machine's own torch.
#   usage: scripts/gpu_build.sh [build-dir] [target]
# e.g. `scripts/gpu_build.sh build-gpu gradd_python` for the Python package
# alone, then `PYTHONPATH=build-gpu/python python -m pytest python/tests/test_cuda.py`.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
target=${2:-all}
deps=$PWD/.deps/root
[ -d "$deps" ] || { echo "gradd: no .deps/root; run scripts/gpu_deps.sh here and carry .deps" >&2; exit 1; }
python=${PYTHON:-/opt/torch/.venv/bin/python}
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython3_EXECUTABLE="$python" -DCAF_ROOT="$deps" -DOPENSSL_ROOT_DIR="$deps/usr" \
  -DCMAKE_PREFIX_PATH="$deps/usr;$deps/usr/lib/x86_64-linux-gnu/cmake" \
  -DCMAKE_BUILD_RPATH="$deps/usr/lib/x86_64-linux-gnu" >/dev/null
cmake --build "$build" -j "$(nproc)" --target "$target"
