#!/usr/bin/env bash
# The [cuda] cases under ASan/UBSan on the GPU machine, built here.
#   here:  make sanitize, then scripts/gpu_asan.sh pack   build-asan's gradd_tests and
#          libgradd.so, debug info stripped (296 and 158 MB with it), with the
#          sanitizer runtimes, into .deps/asan.tar.xz (~16 MB); carry .deps
#   there: scripts/gpu_asan.sh run [FILTER]                 FILTER defaults to "[cuda]"
# CUDA needs ASan's shadow gap unprotected; the driver's own allocations
# are not gradd's leaks. The cases that start gradd-bench start the plain
# one from .deps/bin (scripts/gpu_prebuilt.sh pack), without the ASan
# library on its path: an uninstrumented program cannot load it.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  pack)
    staging=$(mktemp -d)
    strip --strip-debug -o "$staging/gradd_tests" build-asan/gradd_tests
    strip --strip-debug -o "$staging/libgradd.so" build-asan/libgradd.so
    for runtime in libasan.so.8 libubsan.so.1; do
      cp "$(ldd build-asan/gradd_tests | awk -v r="$runtime" '$1 == r {print $3}')" "$staging/"
    done
    mkdir -p .deps
    tar -C "$staging" -cf - . | xz -T0 -6 > .deps/asan.tar.xz
    rm -rf "$staging"
    echo "gradd: $(du -h .deps/asan.tar.xz | cut -f1) in .deps/asan.tar.xz; carry .deps"
    ;;
  run)
    asan=$(mktemp -d)
    tar -xJf .deps/asan.tar.xz -C "$asan"
    printf '#!/bin/bash\nexport LD_LIBRARY_PATH=${LD_LIBRARY_PATH#%s:}\nexec %s "$@"\n' \
      "$asan" "$PWD/.deps/bin/gradd-bench" > "$asan/plain_bench.sh"
    chmod +x "$asan/plain_bench.sh"
    export GRADD_ASAN_DIR=$asan GRADD_ASAN_FILTER=${2:-[cuda]}
    exec scripts/gpu_prebuilt.sh run bash -c 'export LD_LIBRARY_PATH=$GRADD_ASAN_DIR:$LD_LIBRARY_PATH
      export GRADD_TEST_BENCH=$GRADD_ASAN_DIR/plain_bench.sh
      export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1
      exec "$GRADD_ASAN_DIR/gradd_tests" "$GRADD_ASAN_FILTER"'
    ;;
  *)
    echo "usage: scripts/gpu_asan.sh pack | run [FILTER]" >&2
    exit 2
    ;;
esac
