#!/usr/bin/env bash
# Installs what the Windows cross build and its wine test need, from Debian's packages only: the mingw-w64
# cross compilers, NSIS (makensis) for the installer, wine to run the result, PoCL so wine's opencl.dll finds a
# device, and dpkg-dev for `apt-get source` (utf8proc, libpng and zlib are built from Debian's source packages).
# The normal Linux build does not need any of this, so it stays out of scripts/setup.sh (which runs first).
# Idempotent and non-interactive: it adds a deb-src entry only when none exists, and runs `apt-get update` once.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/setup.sh"

packages=(
  mingw-w64 nsis wine wine64 dpkg-dev
  opencl-c-headers opencl-clhpp-headers pocl-opencl-icd
  libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  python3 python3-numpy python3-pil
)

sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
updated=0

# `apt-get source` needs deb-src entries. Add them, for the same suites and mirror as the binary entries, only
# when the machine has none (as Debian's default images do).
if ! grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  src=/etc/apt/sources.list.d/sdturbo-deb-src.sources
  echo "setup-windows: adding deb-src entries in $src"
  codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
  "${sudo_cmd[@]}" tee "$src" >/dev/null <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: ${codename} ${codename}-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  "${sudo_cmd[@]}" apt-get update -qq
  updated=1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-windows: installing ${missing[*]}"
  [ "$updated" -eq 1 ] || "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup-windows: all packages present"
fi
