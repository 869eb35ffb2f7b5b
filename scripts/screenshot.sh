#!/usr/bin/env bash
# Takes the README's screenshot of the main window: starts sdturbo under Xvfb with temporary settings and gallery,
# generates one image, and captures the window with ImageMagick's `import`.
#   scripts/screenshot.sh [OUTPUT.png]          default docs/screenshot-main-window.png
# Environment: SDT_BUILD_DIR (default build/release), SDT_SCREENSHOT_MODEL (default: the embedded random model;
# a real SD-Turbo folder gives a real picture), SDT_SCREENSHOT_PROMPT, SDT_SCREENSHOT_IMAGE (image size, default
# 512x512; a CPU device is faster at 256x256).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-docs/screenshot-main-window.png}
build=${SDT_BUILD_DIR:-build/release}
prompt=${SDT_SCREENSHOT_PROMPT:-"a lighthouse on a cliff at dusk, warm light, oil painting"}
app="$build/bin/sdturbo"
[ -x "$app" ] || { echo "screenshot: $app not found; build it first (cmake --build --preset release)" >&2; exit 1; }
for tool in Xvfb import xwininfo; do
  command -v "$tool" >/dev/null || { echo "screenshot: $tool missing; run scripts/setup.sh" >&2; exit 1; }
done

tmp=$(mktemp -d)
xvfb_pid=""
app_pid=""
cleanup() {
  # No errexit here: the app's wait returns its signal status (143), which would end the trap before Xvfb is
  # stopped, and a leftover Xvfb holds the caller's output pipe open (a `| tail` never returns).
  set +e
  if [ -n "$app_pid" ]; then
    kill "$app_pid" 2>/dev/null
    wait "$app_pid" 2>/dev/null
  fi
  if [ -n "$xvfb_pid" ]; then
    kill "$xvfb_pid" 2>/dev/null
    wait "$xvfb_pid" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# A screen a little larger than the window; -displayfd picks a free display number.
Xvfb -displayfd 3 -screen 0 1600x1000x24 -nolisten tcp 3>"$tmp/display" 2>"$tmp/xvfb.log" &
xvfb_pid=$!
for _ in $(seq 50); do [ -s "$tmp/display" ] && break; sleep 0.1; done
export DISPLAY=":$(cat "$tmp/display")"
export QT_QPA_PLATFORM=xcb

# Fresh settings: the window opens at its first-start size (1440x900), the prompt typed in, Generate pressed.
image=${SDT_SCREENSHOT_IMAGE:-512x512}
printf '[generation]\nwidth=%s\nheight=%s\n' "${image%x*}" "${image#*x}" >"$tmp/settings.ini"
args=(--settings "$tmp/settings.ini" --gallery "$tmp/gallery" --prompt "$prompt" --generate)
[ -n "${SDT_SCREENSHOT_MODEL:-}" ] && args+=(--model "$SDT_SCREENSHOT_MODEL")
XDG_DATA_HOME="$tmp/data" XDG_CONFIG_HOME="$tmp/config" XDG_CACHE_HOME="${XDG_CACHE_HOME:-$HOME/.cache}" \
  QT_QPA_PLATFORM=xcb "$app" "${args[@]}" >"$tmp/app.log" 2>&1 &
app_pid=$!

# Wait for the generated image to land in the gallery (the model opens, kernels build, one image is made).
for _ in $(seq 1200); do
  ls "$tmp"/gallery/*.png >/dev/null 2>&1 && break
  kill -0 "$app_pid" 2>/dev/null || { echo "screenshot: sdturbo exited early" >&2; cat "$tmp/app.log" >&2; exit 1; }
  sleep 0.5
done
ls "$tmp"/gallery/*.png >/dev/null 2>&1 || { echo "screenshot: no image after 10 minutes" >&2; cat "$tmp/app.log" >&2; exit 1; }
sleep 3  # thumbnails and timings settle

# The top-level window carries the class "sdturbo" (Qt also makes small helper windows with the same title).
window=$(xwininfo -root -tree | awk '/\("sdturbo" "sdturbo"\)/ { print $1; exit }')
[ -n "$window" ] || { echo "screenshot: the window was not found" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
import -window "$window" "$tmp/shot.png"
convert "$tmp/shot.png" -strip "$out"
echo "screenshot: wrote $out ($(identify -format '%wx%h' "$out"))"
