#!/usr/bin/env bash
# Installs what gradd builds against, only where it is missing:
# Debian packages (CAF, oneTBB, yaml-cpp, Catch2, OpenSSL, ccache, ninja),
# torch==2.11.0, pytest, torchvision and scikit-build-core from PyPI. Quick
# when everything is already there.
set -euo pipefail

packages=(cmake ninja-build ccache libcaf-dev libtbb-dev libyaml-cpp-dev catch2 libssl-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "gradd: installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python=${PYTHON:-python3}
if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.__version__.startswith("2.11.0") else 1)' 2>/dev/null; then
  echo "gradd: installing torch==2.11.0 from PyPI"
  # A Debian-managed Python refuses plain pip installs (PEP 668): fall back
  # to the user's site-packages there.
  "$python" -m pip install --quiet torch==2.11.0 \
    || "$python" -m pip install --quiet --user --break-system-packages torch==2.11.0
fi
# pytest runs the Python package's tests; torchvision (for torch 2.11) gives
# the Python benchmark a model from a library Python users train with;
# scikit-build-core builds the wheel (`pip install .`, scripts/wheel_check.sh).
for module in pytest:pytest torchvision:torchvision==0.26.0 scikit_build_core:scikit-build-core; do
  if ! "$python" -c "import ${module%%:*}" 2>/dev/null; then
    echo "gradd: installing ${module#*:} from PyPI"
    "$python" -m pip install --quiet "${module#*:}" \
      || "$python" -m pip install --quiet --user --break-system-packages "${module#*:}"
  fi
done
