#!/usr/bin/env bash
# Proves the Windows build works, on Debian, with wine: builds the installer (scripts/build-windows.sh), installs
# it silently into a fresh wine prefix, runs the installed sdturbo-cli.exe (wine's opencl.dll forwards to the
# host's OpenCL loader, so it sees PoCL), generates the fixture case on the tiny fixture model and compares the
# PNG with the diffusers reference, then uninstalls and checks that only the installed files went.
#
#   scripts/test-windows-installer.sh              build (without re-running setup) and test
#   scripts/test-windows-installer.sh --no-build   test the installer already in build/win64
#   scripts/test-windows-installer.sh --keep       keep the wine prefix (build/win64-test/prefix) afterwards
#
# Fixtures: $SDT_FIXTURES, else ../shared/fixtures beside the repository (the layout the unit tests use).
# Needs: scripts/setup-windows.sh (mingw-w64, nsis, wine, wine64, pocl-opencl-icd, python3-numpy, python3-pil).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=1
keep=0
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "test-windows-installer: unknown argument $arg" >&2; exit 2 ;;
  esac
done

fixtures="${SDT_FIXTURES:-$root/../shared/fixtures}"
tiny="$fixtures/sd-turbo-tiny"
work="$root/build/win64-test"
python=python3
[ -x /usr/bin/python3 ] && python=/usr/bin/python3  # Debian's, with python3-numpy and python3-pil

export WINEPREFIX="$work/prefix" WINEARCH=win64 WINEDEBUG=-all
# No wine-mono / wine-gecko download prompts (nothing here needs .NET or HTML), and no winemenubuilder, which
# would copy the installer's shortcuts into the host's menus and desktop.
export WINEDLLOVERRIDES="mscoree=d;mshtml=d;winemenubuilder.exe=d"
# A new prefix links Desktop, Documents, Pictures... to $HOME: give it a home of its own so that the desktop
# shortcut and anything else the programs write there stay inside the test folder.
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" XDG_DATA_HOME="$work/home/.local/share"
unset DISPLAY  # the installer runs silently; nothing may wait for a window

passed=0
failed=0
timings=()
t_start=$SECONDS
stage_start=$SECONDS
stage_done() {
  timings+=("$1: $((SECONDS - stage_start)) s")
  stage_start=$SECONDS
}
ok() { echo "PASS: $1"; passed=$((passed + 1)); }
bad() { echo "FAIL: $1"; failed=$((failed + 1)); }
finish() {
  wineserver -k 2>/dev/null
  [ "$keep" -eq 1 ] || rm -rf "$WINEPREFIX" "$HOME"
  printf 'test-windows-installer: %s\n' "${timings[@]}" "total: $((SECONDS - t_start)) s"
  echo "test-windows-installer: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}
wine_run() { wine "$@"; local rc=$?; wineserver -w; return $rc; }

if [ "$build" -eq 1 ]; then
  "$root/scripts/build-windows.sh" --no-setup || { bad "scripts/build-windows.sh"; finish; }
  stage_done build-windows
fi
installer="$(find "$root/build/win64" -maxdepth 1 -name 'SD-Turbo-Studio-*-win64.exe' | sort | tail -n 1)"
[ -n "$installer" ] || { bad "no installer in build/win64 (run scripts/build-windows.sh)"; finish; }
echo "test-windows-installer: $installer"

# ---- a fresh prefix, then a silent per-user install into a folder of our choice --------------------------------
wineserver -k 2>/dev/null
rm -rf "$work" && mkdir -p "$work/out" "$HOME"
wineboot -i >"$work/wineboot.log" 2>&1
wineserver -w
stage_done wine-prefix

# No /D here: the per-user default folder (%LOCALAPPDATA%\Programs\SD-Turbo Studio) has a space in it, like most
# Windows paths. (/D= takes a path with spaces unquoted on Windows, but wine quotes such an argument on the way
# in, which NSIS then does not recognise; the /D test below uses a folder without spaces.)
wine_run "$installer" /S /CurrentUser /DesktopShortcut >"$work/install.log" 2>&1
inst="$(find "$WINEPREFIX/drive_c/users" -maxdepth 5 -path '*/AppData/Local/Programs/SD-Turbo Studio' -type d | head -n 1)"
cli_win="$(winepath -w "$inst/bin/sdturbo-cli.exe" 2>/dev/null)"
if [ -n "$inst" ] && [ -f "$inst/bin/sdturbo-cli.exe" ] && [ -f "$inst/Uninstall.exe" ] &&
  [ -f "$inst/licenses/THIRD_PARTY.md" ]; then
  ok "silent per-user install into $cli_win"
else
  bad "silent per-user install: no bin/sdturbo-cli.exe, Uninstall.exe or licenses/ under %LOCALAPPDATA%\\Programs\\SD-Turbo Studio"
fi
if [ -d "$root/resources/clip" ]; then
  if [ -n "$(ls -A "$inst/share/sdturbo-studio/clip" 2>/dev/null)" ]; then
    ok "bundled tokenizer vocabulary installed"
  else
    bad "resources/clip exists but share/sdturbo-studio/clip is missing or empty in the installation"
  fi
fi
programs="$(find "$WINEPREFIX/drive_c/users" -path '*Start Menu/Programs/SD-Turbo Studio' -type d | head -n 1)"
desktop="$(find -L "$WINEPREFIX/drive_c/users" -path '*/Desktop/SD-Turbo Studio*.lnk' 2>/dev/null | head -n 1)"
if [ -n "$programs" ] && [ -n "$(find "$programs" -name '*.lnk' -print -quit)" ] && [ -n "$desktop" ]; then
  ok "Start-menu entries and the desktop shortcut (/DesktopShortcut) exist"
else
  bad "Start-menu folder or desktop shortcut missing"
fi
uninstall_key='HKCU\Software\Microsoft\Windows\CurrentVersion\Uninstall\SD-Turbo Studio'
if wine reg query "$uninstall_key" /v InstallLocation 2>/dev/null | grep -q 'Programs\\SD-Turbo Studio'; then
  ok "per-user uninstall entry in HKCU"
else
  bad "no per-user uninstall entry in HKCU"
fi
stage_done install

# ---- the installed CLI -----------------------------------------------------------------------------------------
wine_run "$cli_win" --list-devices >"$work/list-devices.txt" 2>&1
cat "$work/list-devices.txt"
if grep -qiE 'pocl|Portable Computing Language' "$work/list-devices.txt"; then
  ok "sdturbo-cli.exe --list-devices shows PoCL through wine's opencl.dll"
else
  bad "sdturbo-cli.exe --list-devices does not show PoCL"
fi
stage_done list-devices

not_yet() { grep -q 'not available in this build yet' "$1"; }
model_win="$(winepath -w "$tiny/model" 2>/dev/null)"
if [ ! -d "$tiny/model" ]; then
  bad "fixture model $tiny/model not found (set SDT_FIXTURES)"
else
  # The tokenizer against transformers' ids, with prompts outside ASCII: they reach the program through the
  # Windows command line, which is where a narrow-character main() would lose them.
  prompt="a photo of a cat sitting on a windowsill, golden hour"
  for text in "a photo of a cat" "naïve café résumé" "日本語のテキスト"; do
    wine_run "$cli_win" --tokenize "$text" --model "$model_win" >"$work/tokenize.txt" 2>&1
    if not_yet "$work/tokenize.txt"; then
      echo "SKIP: --tokenize is not implemented in this build yet"
      break
    fi
    if "$python" - "$work/tokenize.txt" "$tiny/refs.json" "$text" <<'EOF'; then
import json, sys
out = open(sys.argv[1], encoding="utf-8", errors="replace").read()
ref = next(t["ids"] for t in json.load(open(sys.argv[2], encoding="utf-8"))["tokenizer"] if t["prompt"] == sys.argv[3])
try:
    ids = json.loads(out[out.index("["):out.rindex("]") + 1])
except ValueError:
    sys.exit(f"no JSON array in: {out[:300]!r}")
if ids != ref:
    first = next((i for i, (a, b) in enumerate(zip(ids, ref)) if a != b), min(len(ids), len(ref)))
    sys.exit(f"ids differ from transformers' at position {first}: {ids[:first + 3]} vs {ref[:first + 3]}")
EOF
      ok "sdturbo-cli.exe --tokenize '$text' matches transformers' ids"
    else
      bad "sdturbo-cli.exe --tokenize '$text'"
    fi
  done

  wine_run "$cli_win" --inspect --model "$model_win" >"$work/inspect.txt" 2>&1
  rc=$?
  if not_yet "$work/inspect.txt"; then
    echo "SKIP: --inspect is not implemented in this build yet"
  elif [ "$rc" -eq 0 ]; then
    ok "sdturbo-cli.exe --inspect reads the fixture model (memory-mapped on Windows)"
  else
    bad "sdturbo-cli.exe --inspect failed: $(tail -c 400 "$work/inspect.txt")"
  fi
  stage_done tokenize+inspect

  # The whole pipeline: fixture case 0 with fp32 weights, compared with diffusers' image.
  out_win='C:\out\case0_vae.png'
  mkdir -p "$WINEPREFIX/drive_c/out"
  wine_run "$cli_win" --model "$model_win" --prompt "$prompt" --seed 0 --width 128 --height 128 --steps 1 \
    --weights fp32 --decoder full --output "$out_win" --timings 'C:\out\timings.json' >"$work/generate.txt" 2>&1
  rc=$?
  cat "$work/generate.txt"
  if not_yet "$work/generate.txt"; then
    echo "SKIP: generation is not implemented in this build yet"
  elif [ "$rc" -ne 0 ] || [ ! -f "$WINEPREFIX/drive_c/out/case0_vae.png" ]; then
    bad "sdturbo-cli.exe generation failed (exit $rc)"
  elif "$python" "$root/tests/windows/compare_png.py" "$WINEPREFIX/drive_c/out/case0_vae.png" "$tiny/case0_vae.png"; then
    ok "the installed sdturbo-cli.exe reproduces case0_vae.png"
    [ -f "$WINEPREFIX/drive_c/out/timings.json" ] && cat "$WINEPREFIX/drive_c/out/timings.json" && echo
  else
    bad "the image differs from case0_vae.png"
  fi
  if ! not_yet "$work/generate.txt"; then
    # The kernel cache lives under %LOCALAPPDATA% on Windows.
    if [ -n "$(find "$WINEPREFIX/drive_c/users" -path '*/AppData/Local/SD-Turbo Studio/kernels/*' -type f -print -quit)" ]; then
      ok "kernel binaries cached under %LOCALAPPDATA%\\SD-Turbo Studio\\kernels"
    else
      bad "no kernel cache under %LOCALAPPDATA%\\SD-Turbo Studio\\kernels after generating"
    fi
  fi
  stage_done generate

  # The same case with a model folder and an output file whose names are not ASCII, as on many users' machines
  # ("C:\Users\Zoë\..."): Windows passes them as UTF-16, the programs' UTF-8 manifest turns the command line into
  # UTF-8, and the engine must open and write those paths without mangling them.
  if ! not_yet "$work/generate.txt"; then
    unicode_dir="$WINEPREFIX/drive_c/Modèles/日本"
    mkdir -p "$unicode_dir" && cp -r "$tiny/model" "$unicode_dir/model" && chmod -R u+w "$unicode_dir"
    wine_run "$cli_win" --model 'C:\Modèles\日本\model' --prompt "$prompt" --seed 0 --width 128 --height 128 \
      --steps 1 --weights fp32 --decoder full --output 'C:\Modèles\日本\café.png' >"$work/generate-unicode.txt" 2>&1
    if [ -f "$unicode_dir/café.png" ] &&
      "$python" "$root/tests/windows/compare_png.py" "$unicode_dir/café.png" "$tiny/case0_vae.png" >/dev/null; then
      ok "non-ASCII model and output paths (C:\\Modèles\\日本\\café.png)"
    else
      bad "non-ASCII model and output paths: $(tail -c 300 "$work/generate-unicode.txt")"
    fi
    stage_done generate-unicode-paths
  fi
fi

# ---- uninstall: the installed files go, the user's files stay --------------------------------------------------
mkdir -p "$inst/gallery" "$inst/models"
cp "$tiny/case0_vae.png" "$inst/gallery/kept.png" 2>/dev/null || echo kept >"$inst/gallery/kept.png"
echo "a model the user put here" >"$inst/models/kept.safetensors"
wine_run "$inst/Uninstall.exe" /S >"$work/uninstall.log" 2>&1
left="$(cd "$inst" && find . -type f | sort | tr '\n' ' ')"
if [ "$left" = "./gallery/kept.png ./models/kept.safetensors " ] && [ -z "$(find "$programs" -name '*.lnk' 2>/dev/null)" ] &&
  [ ! -e "$desktop" ] &&
  ! wine reg query "$uninstall_key" >/dev/null 2>&1; then
  ok "uninstall removed the program, shortcuts and registry entry and kept gallery/ and models/"
else
  bad "after uninstall: files left '$left' (expected only the gallery and model files), or shortcuts/registry remain"
fi
stage_done uninstall

# ---- the default mode for an administrator (wine's user is one): all users, HKLM; here with /D= -----------------
wine_run "$installer" /S '/D=C:\SDTurbo' >"$work/install-all-users.log" 2>&1
if [ -f "$WINEPREFIX/drive_c/SDTurbo/bin/sdturbo-cli.exe" ] &&
  wine reg query 'HKLM\Software\Microsoft\Windows\CurrentVersion\Uninstall\SD-Turbo Studio' /v InstallLocation 2>/dev/null |
  grep -q 'C:\\SDTurbo'; then
  ok "silent all-users install into the /D= folder with an HKLM uninstall entry"
else
  bad "silent default install did not reach C:\\SDTurbo with an HKLM entry"
fi
stage_done install-all-users

finish
