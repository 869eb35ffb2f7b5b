#!/usr/bin/env bash
# Cross-builds SD-Turbo Studio for 64-bit Windows on Debian with mingw-w64 and packs it into the NSIS installer
# build/win64/SD-Turbo-Studio-<version>-win64.exe: the desktop app (sdturbo.exe with its Qt DLLs and plugins), the
# CLI and the benchmark.
#
#   scripts/build-windows.sh            set up (Debian packages), build the dependencies once, build, pack
#   scripts/build-windows.sh --no-setup skip scripts/setup-windows.sh (packages already installed)
#   scripts/build-windows.sh --clean    rebuild the build folder and the small dependencies from scratch (the Qt
#                                       build is kept: scripts/build-qt-windows.sh --force rebuilds it)
#
# Folders: build/win64-deps/ (Debian source packages, their builds and the prefix the cross build finds its
# dependencies in), build/win64/ (the CMake build, the installer). Everything comes from Debian's packages:
# header-only libraries are Debian's headers copied into the prefix; utf8proc, libpng and zlib are built from
# Debian's source packages (apt-get source); Qt is cross-built from Debian's qt6-base source package by
# scripts/build-qt-windows.sh (hours on two cores, the first time only: its prefix is reused while the Qt version
# and its options stay); the OpenCL import library is made from installer/OpenCL.def.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="$root/build/win64-deps"
prefix="$deps/prefix"
build="$root/build/win64"
toolchain="$root/installer/mingw-w64-x86_64.cmake"
host=x86_64-w64-mingw32
jobs="${SDT_JOBS:-2}"
setup=1
clean=0
for arg in "$@"; do
  case "$arg" in
    --no-setup) setup=0 ;;
    --clean) clean=1 ;;
    -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "build-windows: unknown argument $arg" >&2; exit 2 ;;
  esac
done

t_start=$SECONDS
stage_start=$SECONDS
timings=()
stage_done() {
  timings+=("$1: $((SECONDS - stage_start)) s")
  stage_start=$SECONDS
}

[ "$setup" -eq 1 ] && "$root/scripts/setup-windows.sh"
stage_done setup

if [ "$clean" -eq 1 ]; then
  # Everything but Qt's source, build and prefix (scripts/build-qt-windows.sh decides when those are stale).
  rm -rf "$build" "$deps/build/zlib" "$deps/build/libpng" "$deps/build/utf8proc"
  find "$prefix" "$deps/src" -mindepth 1 -maxdepth 1 ! -name qt6 ! -name 'qt6-base*' -exec rm -rf {} + 2>/dev/null || true
fi
mkdir -p "$deps/src" "$deps/build" "$prefix/include" "$prefix/lib/pkgconfig" "$prefix/lib/cmake"

# ---- header-only dependencies: Debian's headers in a folder of their own --------------------------------------
# The cross compiler must never see /usr/include (glibc's headers break a Windows build), so each library's
# headers are copied on their own into the prefix, with package config files that point there.
copy_headers() {  # copy_headers <Debian package> <folder under /usr/include>
  local pkg="$1" dir="$2"
  if [ ! -d "/usr/include/$dir" ]; then
    echo "build-windows: /usr/include/$dir missing: install $pkg (scripts/setup-windows.sh)" >&2
    exit 1
  fi
  # Only when they differ: a fresh copy has new timestamps, which would make every object file out of date and
  # turn each incremental build into a full one.
  if ! diff -rq "/usr/include/$dir" "$prefix/include/$dir" >/dev/null 2>&1; then
    rm -rf "${prefix:?}/include/$dir"
    cp -r "/usr/include/$dir" "$prefix/include/$dir"
  fi
}
copy_headers opencl-c-headers CL
copy_headers nlohmann-json3-dev nlohmann
copy_headers libcli11-dev CLI
copy_headers libspdlog-dev spdlog
copy_headers libfmt-dev fmt
# nlohmann_json's and CLI11's own config files locate the headers relative to themselves, so they work from the
# prefix unchanged. spdlog's and fmt's refer to Debian's compiled libraries: ours declare them header-only.
for pkg in nlohmann_json CLI11; do
  rm -rf "${prefix:?}/share/cmake/$pkg"
  mkdir -p "$prefix/share/cmake"
  cp -r "/usr/share/cmake/$pkg" "$prefix/share/cmake/$pkg"
done
for pkg in spdlog fmt; do
  mkdir -p "$prefix/lib/cmake/$pkg"
  cp "$root/installer/cross/${pkg}Config.cmake" "$prefix/lib/cmake/$pkg/${pkg}Config.cmake"
done
deb_version() { dpkg-query -W -f='${Version}' "$1" | sed -e 's/^[0-9]*://' -e 's/[-+~].*//'; }
write_version_file() {  # write_version_file <package> <version>
  cat >"$prefix/lib/cmake/$1/$1ConfigVersion.cmake" <<EOF
set(PACKAGE_VERSION "$2")
if(PACKAGE_FIND_VERSION AND PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
EOF
}
write_version_file spdlog "$(deb_version libspdlog-dev)"
write_version_file fmt "$(deb_version libfmt-dev)"

# ---- the OpenCL import library: links against whatever OpenCL.dll the system has ------------------------------
# A delay-import library: OpenCL.dll is loaded on the first OpenCL call, so the programs start on a machine without
# an OpenCL driver and say what to install (engine/runtime/devices.cpp looks for the DLL before that call).
# (From inside lib/: dlltool names the delay-load descriptor after the output path.)
(cd "$prefix/lib" && "$host-dlltool" -d "$root/installer/OpenCL.def" -y libOpenCL.a -m i386:x86-64)
stage_done headers+opencl

# ---- compiled dependencies from Debian's source packages -------------------------------------------------------
source_dir() {  # source_dir <source package> <folder glob>: unpacks (once) and prints the folder
  local pkg="$1" pattern="$2" dir
  dir="$(find "$deps/src" -maxdepth 1 -type d -name "$pattern" | sort | tail -n 1)"
  if [ -z "$dir" ]; then
    (cd "$deps/src" && apt-get source -qq "$pkg" >/dev/null 2>&1) || {
      echo "build-windows: 'apt-get source $pkg' failed: are deb-src entries configured? (scripts/setup-windows.sh adds them)" >&2
      exit 1
    }
    dir="$(find "$deps/src" -maxdepth 1 -type d -name "$pattern" | sort | tail -n 1)"
  fi
  echo "$dir"
}

if [ ! -f "$prefix/lib/libz.a" ]; then
  src="$(source_dir zlib 'zlib-*')"
  rm -rf "$deps/build/zlib" && cp -r "$src" "$deps/build/zlib"
  # zlib's own configure knows mingw from CHOST; --static builds libz.a only.
  (cd "$deps/build/zlib" &&
    CHOST=$host CC=$host-gcc-posix AR=$host-ar RANLIB=$host-ranlib CFLAGS="-O2" \
      ./configure --static --prefix="$prefix" >/dev/null &&
    make -s -j"$jobs" libz.a >/dev/null && make -s install >/dev/null)
fi

cmake_dep() {  # cmake_dep <name> <source dir> <cmake args...>: a static Release build installed into the prefix
  local name="$1" src="$2"
  shift 2
  cmake -S "$src" -B "$deps/build/$name" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DSDT_WIN64_PREFIX="$prefix" -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DBUILD_SHARED_LIBS=OFF "$@" >/dev/null
  cmake --build "$deps/build/$name" -j "$jobs" >/dev/null
  cmake --install "$deps/build/$name" >/dev/null
}

if [ ! -f "$prefix/lib/libpng16.a" ]; then
  cmake_dep libpng "$(source_dir libpng1.6 'libpng1.6-*')" -DPNG_SHARED=OFF -DPNG_STATIC=ON -DPNG_TESTS=OFF \
    -DPNG_EXECUTABLES=OFF -DSKIP_INSTALL_PROGRAMS=ON -DSKIP_INSTALL_FILES=ON
fi

if [ ! -f "$prefix/lib/libutf8proc.a" ]; then
  cmake_dep utf8proc "$(source_dir utf8proc 'utf8proc-*')" -DUTF8PROC_ENABLE_TESTING=OFF
  # utf8proc's pkg-config file is written for its DLL (-DUTF8PROC_EXPORTS); a static library's users must define
  # UTF8PROC_STATIC instead, or its header declares every function __declspec(dllimport).
  sed -i 's/-DUTF8PROC_EXPORTS/-DUTF8PROC_STATIC/' "$prefix/lib/pkgconfig/libutf8proc.pc"
fi

# Licence texts of everything linked into the executables, installed into licenses/ by installer/CMakeLists.txt.
licenses="$prefix/share/sdt-licenses"
rm -rf "$licenses" && mkdir -p "$licenses"
cp "$(source_dir zlib 'zlib-*')/debian/copyright" "$licenses/zlib.txt"
cp "$(source_dir libpng1.6 'libpng1.6-*')/debian/copyright" "$licenses/libpng.txt"
cp "$(source_dir utf8proc 'utf8proc-*')/debian/copyright" "$licenses/utf8proc.txt"
# The desktop app ships the mingw-w64 runtime DLLs: GCC's libstdc++ and libgcc (GPL-3.0 with the GCC Runtime
# Library Exception) and mingw-w64's winpthreads.
for pkg in libspdlog-dev:spdlog libfmt-dev:fmt nlohmann-json3-dev:nlohmann-json libcli11-dev:cli11 \
  mingw-w64-common:mingw-w64-runtime gcc-mingw-w64-x86-64-posix-runtime:gcc-runtime; do
  cp "/usr/share/doc/${pkg%%:*}/copyright" "$licenses/${pkg#*:}.txt"
done
stage_done dependencies

# ---- Qt 6 for mingw-w64 (a no-op while its prefix is current) ----------------------------------------------------
"$root/scripts/build-qt-windows.sh"
stage_done qt

# ---- the project: engine, sdturbo (the desktop app), sdturbo-cli, sdturbo-bench ---------------------------------
# The toolchain links every executable's runtime statically; here that is left to installer/CMakeLists.txt, which
# does it for the CLI and the benchmark, while the app shares the runtime DLLs with Qt's DLLs (one C++ runtime in
# the process, as Qt was built).
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DSDT_WIN64_PREFIX="$prefix" -DCMAKE_EXE_LINKER_FLAGS="" \
  -DSDT_BUILD_UI=ON -DSDT_BUILD_TESTS=OFF -DSDT_THIRD_PARTY_LICENSES_DIR="$licenses" \
  -DQt6_DIR="$prefix/qt6/lib/cmake/Qt6" -DQT_HOST_PATH=/usr \
  -DQT_HOST_PATH_CMAKE_DIR=/usr/lib/x86_64-linux-gnu/cmake >"$build.configure.log" 2>&1 || {
  tail -n 30 "$build.configure.log" >&2
  echo "build-windows: configure failed (whole log: $build.configure.log)" >&2
  exit 1
}
stage_done configure
targets=(sdturbo sdturbo-cli)
if [ -n "$(find "$root/app/bench" -maxdepth 1 -name '*.cpp' -print -quit 2>/dev/null)" ]; then
  targets+=(sdturbo-bench)
fi
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
stage_done build

# The command-line programs must need nothing but Windows' own DLLs and the system's OpenCL.dll (the app's Qt and
# runtime DLLs are found from its imports by cmake/SdtDeployMingw.cmake when packing).
allowed='^(kernel32|user32|gdi32|advapi32|shell32|ole32|oleaut32|shlwapi|ws2_32|bcrypt|msvcrt|ucrtbase|api-ms-win-[a-z0-9-]+|opencl)\.dll$'
for t in "${targets[@]}"; do
  [ "$t" = sdturbo ] && continue
  exe="$build/bin/$t.exe"
  bad="$("$host-objdump" -p "$exe" | awk '/DLL Name:/ {print $3}' | tr 'A-Z' 'a-z' | grep -Ev "$allowed" || true)"
  if [ -n "$bad" ]; then
    echo "build-windows: $t.exe imports DLLs that a Windows system does not have: $bad" >&2
    exit 1
  fi
done

(cd "$build" && cpack -G NSIS -C Release >"$build.cpack.log" 2>&1) || {
  tail -n 30 "$build.cpack.log" >&2
  echo "build-windows: cpack failed (whole log: $build.cpack.log)" >&2
  exit 1
}
grep -h 'SdtDeployMingw:' "$build.cpack.log" "$build"/_CPack_Packages/*/NSIS/*.log 2>/dev/null | head -n 1 || true
stage_done package

installer="$(find "$build" -maxdepth 1 -name 'SD-Turbo-Studio-*-win64.exe' -newer "$build/CMakeCache.txt" | sort | tail -n 1)"
if [ -z "$installer" ]; then
  echo "build-windows: cpack produced no SD-Turbo-Studio-*-win64.exe in $build" >&2
  exit 1
fi
# A 64-bit installer: Debian's makensis has the amd64 stubs, and wine64 cannot run a 32-bit one.
if ! "$host-objdump" -f "$installer" | grep -q 'pei-x86-64'; then
  echo "build-windows: $installer is not a 64-bit program (installer/CMakeLists.txt's SDT_NSIS_TARGET?)" >&2
  exit 1
fi
echo "build-windows: $installer ($(du -h "$installer" | cut -f1))"
printf 'build-windows: %s\n' "${timings[@]}" "total: $((SECONDS - t_start)) s"
