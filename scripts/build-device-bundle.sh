#!/usr/bin/env bash
# Builds the Qt-free executables and tests here and packs them, with the shared libraries the GPU machine lacks
# (spdlog, fmt, utf8proc, libpng, OpenSSL's libcrypto) and a slice of the golden fixtures, into one folder that can
# be carried to a machine that has only a compiler, CMake and an OpenCL loader. scripts/bench-device.sh runs from
# that folder.
#   scripts/build-device-bundle.sh [BUNDLE_DIR]     (default: .carry/device, ignored by git)
# With SDT_DIFFUSERS_SRC pointing at a diffusers checkout (the folder holding src/diffusers), its package travels
# too (compressed, about 5 MB) for the PyTorch peer (scripts/torch_peer.py), whose device has torch but not
# diffusers.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${1:-.carry/device}
fixtures=${SDT_FIXTURES:-../shared/fixtures}

bash scripts/setup.sh
cmake -S . -B build/device -G Ninja -DCMAKE_BUILD_TYPE=Release -DSDT_BUILD_UI=OFF -DSDT_BUILD_TESTS=ON \
  '-DCMAKE_BUILD_RPATH=$ORIGIN/../lib' >/dev/null
cmake --build build/device -j "$(nproc)" --target sdturbo-cli sdturbo-bench
targets=(sdturbo-cli sdturbo-bench)
# The GPU correctness checks travel too when they build.
for t in sdt_test_runtime sdt_test_kernels sdt_test_models sdt_test_pipeline sdt_test_check; do
  if cmake --build build/device -j "$(nproc)" --target "$t" >/dev/null 2>&1; then targets+=("$t"); else
    echo "note: $t did not build; it stays behind"; fi
done

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/fixtures/sd-turbo-tiny"
for t in "${targets[@]}"; do
  cp "build/device/bin/$t" "$bundle/bin/"
  strip "$bundle/bin/$t"
done
# Shared libraries the executables need that the GPU machine's image does not have.
for exe in "$bundle"/bin/*; do
  ldd "$exe" | awk '/=> \//{print $3}' | grep -E 'libspdlog|libfmt|libutf8proc|libpng16|libz\.so|libcrypto' || true
done | sort -u | while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
# The fixture slice the GPU checks use (the single-file checkpoints stay behind: the carry limit is 64 MiB).
src="$fixtures/sd-turbo-tiny"
cp -r "$src/model" "$src/taesd" "$src/refs.json" "$src/refs.safetensors" "$bundle/fixtures/sd-turbo-tiny/"
cp "$src"/*.png "$bundle/fixtures/sd-turbo-tiny/"
cp scripts/bench-device.sh scripts/bench-portable.sh scripts/device-gpu.sh scripts/torch_peer.py "$bundle/"
if [ -n "${SDT_DIFFUSERS_SRC:-}" ]; then
  tar -czf "$bundle/diffusers-src.tar.gz" -C "$SDT_DIFFUSERS_SRC" src/diffusers
fi
du -sh "$bundle"
