#!/usr/bin/env bash
# Cross-builds Qt 6 (qtbase) for 64-bit Windows with mingw-w64, from Debian's own source package of the same
# version as the host's Qt tools, and installs it into build/win64-deps/prefix/qt6 for scripts/build-windows.sh.
#
#   scripts/build-qt-windows.sh           build once; later runs reuse the prefix (a stamp says how it was built)
#   scripts/build-qt-windows.sh --force   rebuild even when the stamp matches
#
# Only what SD-Turbo Studio needs: Core, Gui, Widgets, Concurrent and Network (model downloads; TLS through
# Windows' own Schannel, no OpenSSL), the `windows` platform plugin and the Windows Vista style. No SQL, D-Bus,
# OpenGL, print support, XML, test library, tests or examples; no image-format plugins (the app reads and writes
# PNG only, which QtGui handles itself). Everything Qt bundles (zlib, libpng, PCRE2, HarfBuzz...) is its bundled
# copy from the same source package, so nothing of the host or of the other dependencies leaks in.
#
# The host's Qt (Debian's qt6-base-dev-tools: moc, rcc, uic...) runs the code generators; a cross build of Qt
# needs a host Qt of exactly its own version, which is why the source package is looked up from that package.
# The build takes hours on two cores: it runs under `nice -n 19`, and it is kept out of CI (.ci/run,
# scripts/test.sh). The prefix is rebuilt only when the Qt version, the configure options, the compiler or this
# script's patches change: build/win64-deps/prefix/qt6/sdt-qt.stamp holds a hash of all four.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="$root/build/win64-deps"
qt_prefix="$deps/prefix/qt6"
stamp="$qt_prefix/sdt-qt.stamp"
toolchain="$root/installer/mingw-w64-x86_64.cmake"
jobs="${SDT_JOBS:-2}"
force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,19p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "build-qt-windows: unknown argument $arg" >&2; exit 2 ;;
  esac
done

for tool in x86_64-w64-mingw32-g++-posix dpkg-source cmake ninja perl; do
  command -v "$tool" >/dev/null || {
    echo "build-qt-windows: $tool missing: run scripts/setup-windows.sh" >&2
    exit 1
  }
done
host_version="$(dpkg-query -W -f='${Version}' qt6-base-dev-tools 2>/dev/null || true)"
if [ -z "$host_version" ] || [ ! -f /usr/lib/x86_64-linux-gnu/cmake/Qt6HostInfo/Qt6HostInfoConfig.cmake ]; then
  echo "build-qt-windows: the host Qt tools are missing: install qt6-base-dev and qt6-base-dev-tools (scripts/setup.sh)" >&2
  exit 1
fi
upstream="$(echo "$host_version" | sed -e 's/^[0-9]*://' -e 's/[-+~].*//')"  # 6.4.2+dfsg-10 -> 6.4.2

# ---- what Qt is built with: these options are hashed into the stamp ---------------------------------------------
options=(
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=ON
  -DQT_HOST_PATH=/usr
  -DQT_HOST_PATH_CMAKE_DIR=/usr/lib/x86_64-linux-gnu/cmake
  -DQT_BUILD_EXAMPLES=OFF -DQT_BUILD_TESTS=OFF -DQT_BUILD_BENCHMARKS=OFF -DQT_BUILD_MANUAL_TESTS=OFF
  # Modules: Core, Gui, Widgets, Concurrent, Network stay; the rest goes.
  -DFEATURE_sql=OFF -DFEATURE_dbus=OFF -DFEATURE_testlib=OFF -DFEATURE_printsupport=OFF -DFEATURE_xml=OFF
  -DFEATURE_opengl=OFF -DFEATURE_vulkan=OFF -DFEATURE_androiddeployqt=OFF
  # Network: Schannel, Windows' TLS, is the only backend the installation carries.
  -DINPUT_openssl=no -DFEATURE_openssl=OFF -DFEATURE_openssl_runtime=OFF -DFEATURE_schannel=ON
  -DFEATURE_networklistmanager=OFF -DFEATURE_libproxy=OFF -DFEATURE_gssapi=OFF -DFEATURE_brotli=OFF
  # Gui: the `windows` platform plugin with DirectWrite fonts; no Direct2D platform, no FreeType engine.
  -DFEATURE_direct2d=OFF -DFEATURE_freetype=OFF -DFEATURE_gif=OFF -DFEATURE_ico=OFF -DFEATURE_jpeg=OFF
  -DFEATURE_style_windowsvista=ON -DFEATURE_icu=OFF -DFEATURE_glib=OFF -DFEATURE_zstd=OFF
  # Qt's bundled third-party code, never the host's or the prefix's libraries.
  -DFEATURE_system_zlib=OFF -DFEATURE_system_png=OFF -DFEATURE_system_jpeg=OFF -DFEATURE_system_pcre2=OFF
  -DFEATURE_system_harfbuzz=OFF -DFEATURE_system_freetype=OFF -DFEATURE_system_doubleconversion=OFF
  -DFEATURE_system_textmarkdownreader=OFF -DFEATURE_pkg_config=OFF
)
compiler="$(x86_64-w64-mingw32-g++-posix --version | head -n 1)"
key="$(printf '%s\n' "qt6-base $host_version" "$compiler" "${options[@]}" | cat - "$toolchain" | sha256sum | cut -c1-16)"
# The patches below change a few sources only: they are part of the prefix's stamp, not of the build folder's.
patches_id="wintab-optional-1 softwaregl-needs-opengl-1 dwrite-db-needs-direct2d-1"

# One build at a time: a second run (another terminal, the installer test) waits for the first, then finds the
# prefix current.
mkdir -p "$deps"
exec 9>"$deps/qt6-build.lock"
if ! flock -n 9; then
  echo "build-qt-windows: another Qt build is running; waiting for it"
  flock 9
fi

if [ "$force" -eq 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key $patches_id" ] &&
  [ -f "$qt_prefix/lib/cmake/Qt6/Qt6Config.cmake" ]; then
  echo "build-qt-windows: Qt $upstream for mingw-w64 is up to date in $qt_prefix"
  exit 0
fi

# ---- Debian's source package, unpacked with Debian's patches applied --------------------------------------------
mkdir -p "$deps/src"
src="$deps/src/qt6-base-$upstream+dfsg"
[ -d "$src" ] || src="$(find "$deps/src" -maxdepth 1 -type d -name "qt6-base-$upstream*" | sort | tail -n 1)"
if [ -z "$src" ] || [ ! -f "$src/CMakeLists.txt" ]; then
  echo "build-qt-windows: fetching Debian's source package qt6-base=$host_version (about 45 MB)"
  (cd "$deps/src" && apt-get source -qq "qt6-base=$host_version" >/dev/null 2>&1) || {
    echo "build-qt-windows: 'apt-get source qt6-base=$host_version' failed: are deb-src entries configured?" \
      "(scripts/setup-windows.sh adds them)" >&2
    exit 1
  }
  src="$(find "$deps/src" -maxdepth 1 -type d -name "qt6-base-$upstream*" | sort | tail -n 1)"
fi
echo "build-qt-windows: Qt $upstream from $src"

# ---- patches to Debian's source ------------------------------------------------------------------------------------
# Debian's +dfsg source drops src/3rdparty/wintab (Wacom's Wintab header, whose licence forbids modification), which
# the `windows` platform plugin includes for legacy tablet drivers. Without it the plugin keeps Windows' own pen
# input (WM_POINTER, Windows 8 and later) and leaves out only the Wintab path: its sources are left out of the
# plugin and its uses compiled out. Idempotent, and limited to the plugin, so an existing build folder is reused.
plugin="$src/src/plugins/platforms/windows"
if [ ! -f "$src/src/3rdparty/wintab/wintab.h" ] && ! grep -q SDT_NO_WINTAB "$plugin/qwindowscontext.cpp"; then
  sed -i 's|CONDITION QT_FEATURE_tabletevent$|CONDITION QT_FEATURE_tabletevent AND EXISTS "${QtBase_SOURCE_DIR}/src/3rdparty/wintab/wintab.h"|' \
    "$plugin/CMakeLists.txt"
  sed -i 's|^#if QT_CONFIG(tabletevent)$|#if QT_CONFIG(tabletevent) \&\& !defined(SDT_NO_WINTAB)|' "$plugin/qwindowscontext.cpp"
  sed -i '0,/^#if QT_CONFIG(tabletevent)$/s||#if QT_CONFIG(tabletevent) \&\& !defined(SDT_NO_WINTAB)|' "$plugin/qwindowspointerhandler.cpp"
  sed -i '1i #define SDT_NO_WINTAB 1 // build-qt-windows.sh: Wintab is not in the source package' \
    "$plugin/qwindowscontext.cpp" "$plugin/qwindowspointerhandler.cpp"
fi
# Qt 6.4.2 leaves `dynamicgl` on for Windows when OpenGL is off, and the plugin's isSoftwareGl() then asks OpenGL's
# static context: that test is compiled only with OpenGL (without it no GL is software GL).
if ! grep -q 'QT_CONFIG(dynamicgl) && QT_CONFIG(opengl)' "$plugin/qwindowswindow.cpp"; then
  sed -i '/^static inline bool isSoftwareGl()/,/^}/s|^#if QT_CONFIG(dynamicgl)$|#if QT_CONFIG(dynamicgl) \&\& QT_CONFIG(opengl)|' \
    "$plugin/qwindowswindow.cpp"
fi
grep -q 'QT_CONFIG(dynamicgl) && QT_CONFIG(opengl)' "$plugin/qwindowswindow.cpp" || {
  echo "build-qt-windows: could not patch isSoftwareGl() in $plugin/qwindowswindow.cpp (Qt's sources changed?)" >&2
  exit 1
}
# QtGui builds its DirectWrite font database (the opt-in `-platform windows:fontengine=directwrite`) only with
# Direct2D, which is off here, but the plugin refers to it whenever `directwrite3` is on: the option is compiled
# only where the class exists. The default font database (GDI enumeration, DirectWrite rendering) is unchanged.
if ! grep -q 'QT_CONFIG(directwrite3) && QT_CONFIG(direct2d)' "$plugin/qwindowsintegration.cpp"; then
  sed -i 's|^#if QT_CONFIG(directwrite3)$|#if QT_CONFIG(directwrite3) \&\& QT_CONFIG(direct2d)|' "$plugin/qwindowsintegration.cpp"
fi
grep -q 'QT_CONFIG(directwrite3) && QT_CONFIG(direct2d)' "$plugin/qwindowsintegration.cpp" || {
  echo "build-qt-windows: could not patch the DirectWrite font database in $plugin (Qt's sources changed?)" >&2
  exit 1
}
grep -q 'AND EXISTS "${QtBase_SOURCE_DIR}/src/3rdparty/wintab/wintab.h"' "$plugin/CMakeLists.txt" ||
  [ -f "$src/src/3rdparty/wintab/wintab.h" ] || {
  echo "build-qt-windows: could not make Wintab optional in $plugin (Qt's sources changed?)" >&2
  exit 1
}

# ---- configure, build, install -----------------------------------------------------------------------------------
build="$deps/build/qt6-base"
t0=$SECONDS
rm -rf "$qt_prefix"
# A different configuration starts from an empty build folder (stale feature caches would survive otherwise).
if [ ! -f "$build/sdt-qt.stamp" ] || [ "$(cat "$build/sdt-qt.stamp")" != "$key" ]; then
  rm -rf "$build"
fi
mkdir -p "$build"
# No prefix of other dependencies: Qt must find only the mingw-w64 sysroot (see the toolchain file) and its own
# bundled libraries. No compiler cache either: Qt's precompiled headers defeat it, and the objects would crowd it.
unset SDT_WIN64_PREFIX CMAKE_C_COMPILER_LAUNCHER CMAKE_CXX_COMPILER_LAUNCHER
nice -n 19 cmake -S "$src" -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
  -DCMAKE_INSTALL_PREFIX="$qt_prefix" "${options[@]}" >"$build/configure.log" 2>&1 || {
  tail -n 40 "$build/configure.log" >&2
  echo "build-qt-windows: configure failed (whole log: $build/configure.log)" >&2
  exit 1
}
echo "$key" >"$build/sdt-qt.stamp"
t1=$SECONDS
echo "build-qt-windows: configured in $((t1 - t0)) s; building with -j$jobs under nice -n 19 (hours on two cores)"
nice -n 19 cmake --build "$build" --parallel "$jobs"
nice -n 19 cmake --install "$build" >/dev/null
t2=$SECONDS

# Qt's licence texts go with its DLLs (installer/CMakeLists.txt installs them into licenses/Qt).
mkdir -p "$qt_prefix/LICENSES"
cp "$src"/LICENSES/*.txt "$qt_prefix/LICENSES/"
cp "$src/debian/copyright" "$qt_prefix/LICENSES/debian-copyright.txt"
echo "$key $patches_id" >"$stamp"
printf 'qt6-base %s\nconfigure: %d s\nbuild+install: %d s\njobs: %s\n' "$host_version" "$((t1 - t0))" \
  "$((t2 - t1))" "$jobs" >"$qt_prefix/sdt-qt-build-time.txt"
echo "build-qt-windows: Qt $upstream installed in $qt_prefix (configure $((t1 - t0)) s, build+install $((t2 - t1)) s)"
