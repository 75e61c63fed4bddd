#!/usr/bin/env bash
# Run HERE (the CPU machine, which reaches Debian's registry): fetches the
# Debian packages gradd builds against, and elfutils for eu-stack (the GPU
# machine has no debugger: `.deps/root/usr/bin/eu-stack -p PID` prints a
# hung process's threads), and unpacks them into .deps/root, a git-ignored
# folder to carry to the GPU machine, which has no registry.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(libcaf-dev libcaf-core0.17 libcaf-io0.17 libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 libhwloc15
          libyaml-cpp-dev libyaml-cpp0.7 catch2 libssl-dev libssl3
          elfutils libdw1 libelf1 libasm1 libdebuginfod1)
rm -rf .deps && mkdir -p .deps/debs .deps/root
(cd .deps/debs && apt-get download "${packages[@]}" >/dev/null)
for deb in .deps/debs/*.deb; do dpkg -x "$deb" .deps/root; done
rm -rf .deps/debs
# What the GPU machine never reads, so that .deps with scripts/gpu_asan.sh's
# tarball stays within a carry's 64 MiB: the static archives of libraries
# gradd links shared, documentation, and elfutils' tools but eu-stack.
rm -f .deps/root/usr/lib/x86_64-linux-gnu/{libcrypto,libssl,libyaml-cpp}.a
rm -rf .deps/root/usr/share/doc .deps/root/usr/share/locale .deps/root/usr/share/man
find .deps/root/usr/bin -name 'eu-*' ! -name eu-stack -delete
echo "gradd: unpacked ${#packages[@]} packages into .deps/root ($(du -sh .deps | cut -f1))"
