#!/usr/bin/env bash
# Installs everything the build and the tests need from Debian's packages. Idempotent and
# non-interactive: packages already present are left alone, and `apt-get update` runs at most once.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  qt6-base-dev qt6-base-dev-tools libgl-dev
  ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers clinfo pocl-opencl-icd
  libspdlog-dev libfmt-dev nlohmann-json3-dev libutf8proc-dev libgtest-dev libgmock-dev libpng-dev libcli11-dev libssl-dev
  clang libclang-rt-14-dev
  oclgrind
  ccache
  xvfb xauth x11-utils imagemagick
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all packages present"
fi
