#!/usr/bin/env bash
# Runs this machine's build on the GPU machine, which then builds nothing
# (a fresh build there takes ~150 s of its time). Both have torch
# 2.11.0+cu130, and this build compiles the CUDA code with nvcc.
#   here:  scripts/gpu_prebuilt.sh pack [DIR]  build/'s gradd_tests, gradd-bench
#                                            and libgradd.so into DIR (default
#                                            .deps/bin; another one, e.g. .deps/new,
#                                            for scripts/gpu_ab.sh), with the commit
#   there: scripts/gpu_prebuilt.sh run CMD   CMD with their libraries found
#                                            (.deps/bin, .deps/root, torch's)
# Carry .deps (scripts/gpu_deps.sh). C++ only: the Python module is built
# for this machine's Python.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  pack)
    dir=${2:-.deps/bin}
    mkdir -p "$dir"
    cp build/gradd_tests build/gradd-bench build/libgradd.so "$dir/"
    git rev-parse --short HEAD > "$dir/COMMIT"
    echo "gradd: $(du -sh "$dir" | cut -f1) of binaries in $dir; carry .deps"
    ;;
  run)
    shift
    site=$(${PYTHON:-/opt/torch/.venv/bin/python} -c 'import site; print(site.getsitepackages()[0])')
    nvidia=$(ls -d "$site"/nvidia/*/lib 2>/dev/null | tr '\n' ':')
    # Before the build machine's paths the binaries carry (RUNPATH).
    export LD_LIBRARY_PATH=$PWD/.deps/bin:$PWD/.deps/root/usr/lib/x86_64-linux-gnu:$site/torch/lib:${nvidia}${LD_LIBRARY_PATH:-}
    # The cases that start gradd-bench start this one, not the build path here.
    export GRADD_TEST_BENCH=$PWD/.deps/bin/gradd-bench
    exec "$@"
    ;;
  *)
    echo "usage: scripts/gpu_prebuilt.sh pack | run CMD..." >&2
    exit 2
    ;;
esac
