#!/usr/bin/env bash
# Proves the Windows build works, on Debian, with wine: builds the installer (scripts/build-windows.sh, which
# cross-builds Qt the first time: hours), installs it silently into a fresh wine prefix, runs the installed
# sdturbo-cli.exe (wine's opencl.dll forwards to the host's OpenCL loader, so it sees PoCL), generates the fixture
# case on the tiny fixture model and compares the PNG with the diffusers reference; starts the desktop app
# sdturbo.exe on an Xvfb display, lets it generate from a typed prompt into a gallery folder with a non-ASCII name,
# checks the PNG's parameters, takes a screenshot of its window (docs/screenshot-windows-wine.png) and closes it;
# checks that the app and the CLI explain a missing OpenCL driver and that the installer warns about it; then
# uninstalls and checks that only the installed files went (the gallery, models and settings stay).
#
#   scripts/test-windows-installer.sh              set up what is missing, build and test (one command on a
#                                                  fresh machine)
#   scripts/test-windows-installer.sh --no-build   test the installer already in build/win64
#   scripts/test-windows-installer.sh --keep       keep the wine prefix (build/win64-test/prefix) afterwards
#
# Fixtures: $SDT_FIXTURES, else ../shared/fixtures beside the repository (the layout the unit tests use).
# Needs: scripts/setup-windows.sh's packages (mingw-w64, nsis, wine, wine64, pocl-opencl-icd, xvfb, imagemagick,
# python3-numpy, python3-pil); the build step installs them when they are missing.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=1
keep=0
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}"; exit 0 ;;
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
unset DISPLAY  # the installer runs silently; nothing may wait for a window (the app gets an Xvfb display below)

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
xvfb_pid=""
finish() {
  wineserver -k 2>/dev/null
  [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null
  [ "$keep" -eq 1 ] || rm -rf "$WINEPREFIX" "$HOME"
  printf 'test-windows-installer: %s\n' "${timings[@]}" "total: $((SECONDS - t_start)) s"
  echo "test-windows-installer: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}
wine_run() { wine "$@"; local rc=$?; wineserver -w; return $rc; }

if [ "$build" -eq 1 ]; then
  "$root/scripts/build-windows.sh" || { bad "scripts/build-windows.sh"; finish; }
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
app_win="$(winepath -w "$inst/bin/sdturbo.exe" 2>/dev/null)"
if [ -n "$inst" ] && [ -f "$inst/bin/sdturbo.exe" ] && [ -f "$inst/bin/sdturbo-cli.exe" ] &&
  [ -f "$inst/Uninstall.exe" ] && [ -f "$inst/licenses/THIRD_PARTY.md" ]; then
  ok "silent per-user install of sdturbo.exe and sdturbo-cli.exe into $(dirname "$cli_win")"
else
  bad "silent per-user install: no bin/sdturbo.exe, bin/sdturbo-cli.exe, Uninstall.exe or licenses/ under %LOCALAPPDATA%\\Programs\\SD-Turbo Studio"
fi

# What the deploy step put next to the programs: every DLL any of them (plugins included) imports is there or is
# Windows' own (wine's system32 has a stand-in for each), and every DLL there is imported by something; the Qt
# plugins are the `windows` platform, the styles and the Schannel TLS backend (no OpenSSL anywhere).
deploy_report="$("$python" - "$inst/bin" "$WINEPREFIX/drive_c/windows/system32" <<'EOF_PY'
import os, re, subprocess, sys
bin_dir, system32 = sys.argv[1], sys.argv[2]
system = {n.lower() for n in os.listdir(system32)}
files = [os.path.join(d, f) for d, _, fs in os.walk(bin_dir) for f in fs if f.lower().endswith((".exe", ".dll"))]
local = {os.path.basename(f).lower() for f in files if os.path.dirname(f) == bin_dir}
imported, problems = set(), []
for f in files:
    dump = subprocess.run(["x86_64-w64-mingw32-objdump", "-p", f], capture_output=True, text=True).stdout
    for name in re.findall(r"DLL Name: (\S+)", dump):
        name = name.lower()
        imported.add(name)
        if name not in local and name not in system and not name.startswith("api-ms-"):
            problems.append(f"{os.path.relpath(f, bin_dir)} imports {name}, which is neither shipped nor Windows'")
for name in sorted(local - imported):
    if name.endswith(".dll"):
        problems.append(f"{name} is shipped but nothing imports it")
plugins = sorted(os.path.relpath(f, bin_dir).replace(os.sep, "/") for f in files if os.path.dirname(f) != bin_dir)
if "platforms/qwindows.dll" not in plugins:
    problems.append("no platforms/qwindows.dll")
if [p for p in plugins if p.startswith("platforms/") and p != "platforms/qwindows.dll"]:
    problems.append("platform plugins other than qwindows.dll")
if "qt6network.dll" in local and "tls/qschannelbackend.dll" not in plugins:
    problems.append("Qt6Network.dll without the Schannel TLS backend")
if [n for n in local if "ssl" in n or "crypto" in n] or [p for p in plugins if "openssl" in p]:
    problems.append("OpenSSL in the installation")
print("DLLs: " + " ".join(sorted(n for n in local if n.endswith(".dll"))) + "; plugins: " + " ".join(plugins))
for p in problems:
    print("PROBLEM: " + p)
EOF_PY
)"
echo "$deploy_report"
if [ -n "$inst" ] && [ -f "$inst/bin/sdturbo.exe" ] && ! grep -q '^PROBLEM' <<<"$deploy_report"; then
  ok "bin/ holds exactly the DLLs and Qt plugins the programs import (objdump), no OpenSSL"
else
  bad "the deployed DLLs and plugins: $(grep '^PROBLEM' <<<"$deploy_report" | tr '\n' ' ')"
fi
missing_texts=""
for text in THIRD_PARTY.md SD-Turbo-Studio.txt Qt/LGPL-3.0-only.txt Qt/GPL-3.0-only.txt Qt/debian-copyright.txt \
  spdlog.txt fmt.txt libpng.txt zlib.txt utf8proc.txt nlohmann-json.txt cli11.txt mingw-w64-runtime.txt gcc-runtime.txt; do
  [ -s "$inst/licenses/$text" ] || missing_texts+=" $text"
done
if [ -z "$missing_texts" ] && grep -q 'GNU LESSER GENERAL PUBLIC LICENSE' "$inst/licenses/Qt/LGPL-3.0-only.txt" &&
  grep -q 'GCC Runtime Library Exception' "$inst/licenses/gcc-runtime.txt"; then
  ok "licences: the project's, Qt's LGPL-3.0 and every library's text in licenses/"
else
  bad "licence texts missing from licenses/:${missing_texts:- (LGPL or GCC runtime exception text not found)}"
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
# The app is the main entry: "SD-Turbo Studio" in the Start menu and on the desktop starts sdturbo.exe; the CLI
# keeps its command prompt.
lnk_targets() {  # lnk_targets FILE NAME: the shortcut names NAME (as ANSI or UTF-16 text)
  "$python" -c 'import sys; b = open(sys.argv[1], "rb").read(); n = sys.argv[2]
sys.exit(0 if n.encode() in b or n.encode("utf-16-le") in b else 1)' "$1" "$2" 2>/dev/null
}
if [ -n "$programs" ] && lnk_targets "$programs/SD-Turbo Studio.lnk" sdturbo.exe &&
  [ -f "$programs/SD-Turbo Studio command prompt.lnk" ] && [ "$(basename "$desktop")" = "SD-Turbo Studio.lnk" ] &&
  lnk_targets "$desktop" sdturbo.exe; then
  ok "Start menu: 'SD-Turbo Studio' (the app) and the command prompt; desktop shortcut to the app (/DesktopShortcut)"
else
  bad "Start-menu entries or desktop shortcut missing or not pointing to sdturbo.exe ($(ls "$programs" 2>&1 | tr '\n' ' '); desktop: $desktop)"
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
  # ids_match FILE TEXT: the JSON array of ids in FILE (the CLI's output) equals transformers' ids for TEXT.
  ids_match() {
    "$python" - "$1" "$tiny/refs.json" "$2" <<'EOF'
import json, sys
out = open(sys.argv[1], encoding="utf-8", errors="replace").read()
ref = next(t["ids"] for t in json.load(open(sys.argv[2], encoding="utf-8"))["tokenizer"] if t["prompt"] == sys.argv[3])
ids = None
for line in out.splitlines():  # the one line that is a JSON array (log lines start with "[time]" too)
    line = line.strip()
    if line.startswith("[") and line.endswith("]"):
        try:
            ids = json.loads(line)
            break
        except ValueError:
            pass
if ids is None:
    sys.exit(f"no JSON array in: {out[:300]!r}")
if ids != ref:
    first = next((i for i, (a, b) in enumerate(zip(ids, ref)) if a != b), min(len(ids), len(ref)))
    sys.exit(f"ids differ from transformers' at position {first}: {ids[:first + 3]} vs {ref[:first + 3]}")
EOF
  }
  for text in "a photo of a cat" "naïve café résumé" "日本語のテキスト"; do
    wine_run "$cli_win" --tokenize "$text" --model "$model_win" >"$work/tokenize.txt" 2>&1
    if not_yet "$work/tokenize.txt"; then
      echo "SKIP: --tokenize is not implemented in this build yet"
      break
    fi
    if ids_match "$work/tokenize.txt" "$text"; then
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
    # The weights on the device are counted there too (wine's OpenCL bridge calls no destructor callbacks; the count
    # once stayed at zero, and the app showed "Weights on device 0.0 MiB").
    if "$python" -c 'import json, sys
sys.exit(0 if json.load(open(sys.argv[1], encoding="utf-8"))["weight_bytes"] > 0 else 1)' \
      "$WINEPREFIX/drive_c/out/timings.json" 2>/dev/null; then
      ok "sdturbo-cli.exe counts the weights on the device"
    else
      bad "the timings report no weights on the device (weight_bytes)"
    fi
    # The kernel cache lives under %LOCALAPPDATA% on Windows.
    if [ -n "$(find "$WINEPREFIX/drive_c/users" -path '*/AppData/Local/SD-Turbo Studio/kernels/*' -type f -print -quit)" ]; then
      ok "kernel binaries cached under %LOCALAPPDATA%\\SD-Turbo Studio\\kernels"
    else
      bad "no kernel cache under %LOCALAPPDATA%\\SD-Turbo Studio\\kernels after generating"
    fi
  fi
  stage_done generate

  # The same case with every path outside ASCII, as on many users' machines ("C:\Users\Zoë\..."): the model,
  # the TAESD, the kernel cache, both images and the timings, in folders and names with Latin accents, Japanese
  # and an emoji (a UTF-16 surrogate pair). Windows passes them as UTF-16; the programs read their command line
  # as UTF-16 and convert it to UTF-8, and the engine turns UTF-8 into paths explicitly (sdt/utf8_path.hpp):
  # std::filesystem::path(std::string) would decode them in the C library's code page and miss every file.
  if ! not_yet "$work/generate.txt"; then
    u_models="$WINEPREFIX/drive_c/Modèles/モデル 🌃"
    u_out="$WINEPREFIX/drive_c/出力 Zoë"
    u_model_win='C:\Modèles\モデル 🌃\model'
    u_png_win='C:\出力 Zoë\café 東京.png'
    mkdir -p "$u_models" "$u_out" && cp -r "$tiny/model" "$u_models/model" &&
      cp "$tiny/taesd_decoder.safetensors" "$tiny/taesd_encoder.safetensors" "$u_models/" && chmod -R u+w "$u_models"

    # Reading: the tokenizer files of the model folder, and every weight file memory-mapped (CreateFileW).
    # -v logs the vocabulary file it read: without it the bundled copy (the same ids) would hide a missed folder.
    wine_run "$cli_win" -v --tokenize "naïve café résumé" --model "$u_model_win" >"$work/tokenize-unicode.txt" 2>&1
    if grep -qF 'CLIP vocabulary from C:\Modèles\モデル 🌃\model\tokenizer\vocab.json' "$work/tokenize-unicode.txt" &&
      ids_match "$work/tokenize-unicode.txt" "naïve café résumé"; then
      ok "sdturbo-cli.exe --tokenize reads the tokenizer of a non-ASCII model folder and matches transformers"
    else
      bad "--tokenize with the model in $u_model_win: $(tail -c 300 "$work/tokenize-unicode.txt")"
    fi
    wine_run "$cli_win" --inspect --model "$u_model_win" >"$work/inspect-unicode.txt" 2>&1
    rc=$?
    # The report names each weight file by its path, which must come back as the same UTF-8 text.
    if [ "$rc" -eq 0 ] && grep -qF 'C:\Modèles\モデル 🌃\model\unet\diffusion_pytorch_model.safetensors' \
      "$work/inspect-unicode.txt"; then
      ok "sdturbo-cli.exe --inspect maps the weights in $u_model_win and names them in UTF-8"
    else
      bad "--inspect with the model in $u_model_win (exit $rc): $(tail -c 400 "$work/inspect-unicode.txt")"
    fi

    # Generating: both decoders, so the TAESD image's name is derived from the output's (café 東京_taesd.png).
    wine_run "$cli_win" --model "$u_model_win" --taesd 'C:\Modèles\モデル 🌃\taesd_decoder.safetensors' \
      --cache-dir 'C:\Modèles\キャッシュ' --prompt "$prompt" --seed 0 --width 128 --height 128 --steps 1 \
      --weights fp32 --decoder both --output "$u_png_win" --timings 'C:\出力 Zoë\時間.json' \
      >"$work/generate-unicode.txt" 2>&1
    rc=$?
    cat "$work/generate-unicode.txt"
    if [ "$rc" -ne 0 ]; then
      bad "generation with non-ASCII paths failed (exit $rc): $(tail -c 300 "$work/generate-unicode.txt")"
    else
      for pair in "café 東京.png:case0_vae.png" "café 東京_taesd.png:case0_taesd.png"; do
        made="$u_out/${pair%%:*}"
        if [ -f "$made" ] && "$python" "$root/tests/windows/compare_png.py" "$made" "$tiny/${pair#*:}"; then
          ok "non-ASCII paths: C:\\出力 Zoë\\${pair%%:*} reproduces ${pair#*:}"
        else
          bad "non-ASCII paths: C:\\出力 Zoë\\${pair%%:*} missing or different from ${pair#*:} (files there: $(ls "$u_out" 2>&1 | tr '\n' ' '))"
        fi
      done
      # What the program prints and writes about those paths is UTF-8 too.
      if grep -qF "wrote $u_png_win (" "$work/generate-unicode.txt"; then
        ok "sdturbo-cli.exe reports the output as $u_png_win"
      else
        bad "the 'wrote ...' line does not name $u_png_win in UTF-8"
      fi
      if "$python" -c 'import json, sys; json.load(open(sys.argv[1], encoding="utf-8"))["stages_ms"]' \
        "$u_out/時間.json" 2>/dev/null; then
        ok "timings written to C:\\出力 Zoë\\時間.json"
      else
        bad "no valid timings JSON at C:\\出力 Zoë\\時間.json"
      fi
      if [ -n "$(find "$WINEPREFIX/drive_c/Modèles/キャッシュ" -name '*.bin' -type f -print -quit 2>/dev/null)" ] &&
        [ -z "$(find "$WINEPREFIX/drive_c/Modèles/キャッシュ" -name '*.tmp*' -print -quit 2>/dev/null)" ]; then
        ok "kernel binaries cached in the non-ASCII --cache-dir C:\\Modèles\\キャッシュ"
      else
        bad "no kernel cache entries (or leftover temporary files) in C:\\Modèles\\キャッシュ"
      fi
    fi
    # Nothing may have gone to a mangled twin of those folders (UTF-8 bytes read as code-page characters).
    mangled="$(cd "$WINEPREFIX/drive_c" && find . -maxdepth 1 -name '*Ã*' -print 2>/dev/null | tr '\n' ' ')"
    if [ -z "$mangled" ]; then
      ok "no mangled (mojibake) folder names under C:\\"
    else
      bad "folders with mangled names under C:\\: $mangled"
    fi
    stage_done generate-unicode-paths
  fi
fi

# ---- no OpenCL driver: the CLI says what to install instead of failing to start -------------------------------
# OpenCL.dll is delay-loaded; with wine's opencl.dll disabled, LoadLibrary fails as on a Windows without a driver.
no_opencl="$WINEDLLOVERRIDES;opencl=d"
WINEDLLOVERRIDES="$no_opencl" wine_run "$cli_win" --list-devices >"$work/list-devices-no-opencl.txt" 2>&1
rc=$?
if grep -q 'No OpenCL device found' "$work/list-devices-no-opencl.txt" &&
  grep -q 'AMD Adrenalin' "$work/list-devices-no-opencl.txt" && [ "$rc" -lt 128 ]; then
  ok "without OpenCL.dll sdturbo-cli.exe starts and says which driver to install"
else
  bad "sdturbo-cli.exe --list-devices without OpenCL.dll (exit $rc): $(tail -c 300 "$work/list-devices-no-opencl.txt")"
fi
stage_done cli-no-opencl

# ---- the desktop app on an Xvfb display ---------------------------------------------------------------------------
Xvfb -displayfd 3 -screen 0 1600x1000x24 -nolisten tcp 3>"$work/display" 2>"$work/xvfb.log" &
xvfb_pid=$!
for _ in $(seq 50); do [ -s "$work/display" ] && break; sleep 0.1; done
export DISPLAY=":$(cat "$work/display")"
# The app's settings live in the registry (HKCU\Software\SD-Turbo Studio\sdturbo); a small image keeps PoCL quick.
settings_key='HKCU\Software\SD-Turbo Studio\sdturbo'
wine reg add "$settings_key\generation" /v width /t REG_DWORD /d 256 /f >/dev/null 2>&1
wine reg add "$settings_key\generation" /v height /t REG_DWORD /d 256 /f >/dev/null 2>&1

app_pid=""
app_window() {  # the id of the app's largest mapped top-level window (wine names its class after the .exe)
  xwininfo -root -children 2>/dev/null | awk '/"sdturbo.exe"/ {print $1}' | while read -r id; do
    info="$(xwininfo -id "$id" 2>/dev/null)"
    grep -q 'Map State: IsViewable' <<<"$info" || continue
    echo "$(awk '/Width:/ {w=$2} /Height:/ {h=$2} END {print w*h}' <<<"$info") $id"
  done | sort -n | tail -n 1 | cut -d' ' -f2
}
close_app() {  # close_app NAME: closes the window as a user would (WM_CLOSE), then expects exit code 0 within 60 s
  wine taskkill /im sdturbo.exe >"$work/taskkill.log" 2>&1
  for _ in $(seq 120); do kill -0 "$app_pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$app_pid" 2>/dev/null; then
    bad "$1: sdturbo.exe did not exit within 60 s of its window being closed"
    kill "$app_pid" 2>/dev/null
    wineserver -k 2>/dev/null
  else
    wait "$app_pid"
    local rc=$?
    if [ "$rc" -eq 0 ] && ! grep -qi 'unhandled exception\|page fault' "$work/app-$1.log"; then
      ok "$1: sdturbo.exe exits cleanly (exit code 0) when its window is closed"
    else
      bad "$1: sdturbo.exe exit code $rc after closing: $(tail -c 300 "$work/app-$1.log")"
    fi
  fi
  wineserver -w
  app_pid=""
}

# A prompt typed with accents and Japanese, a gallery folder named in three scripts and an emoji.
app_prompt="a lighthouse on a cliff at dusk, Zoë's café, 灯台"
gallery_unix="$WINEPREFIX/drive_c/Galerie Zoë/画廊 🌃"
gallery_win='C:\Galerie Zoë\画廊 🌃'
# The folder above exists, as when a user names a new gallery inside a folder of theirs: the app makes only the
# last folder of a chosen gallery (a whole missing path is what a removed drive looks like; ui/gallery_files.cpp).
mkdir -p "$(dirname "$gallery_unix")"
WINEDEBUG=-all wine "$app_win" --model random:tiny --prompt "$app_prompt" --generate --gallery "$gallery_win" \
  >"$work/app-generate.log" 2>&1 &
app_pid=$!
png=""
for _ in $(seq 1200); do
  png="$(find "$gallery_unix" -maxdepth 1 -name '*.png' -print -quit 2>/dev/null)"
  [ -n "$png" ] && break
  kill -0 "$app_pid" 2>/dev/null || break
  sleep 0.5
done
if [ -n "$png" ]; then
  ok "sdturbo.exe opened and generated $(basename "$png") into C:\\Galerie Zoë\\画廊 🌃"
  sleep 5  # the thumbnail, the large view and the timings settle
  if "$python" "$root/tests/windows/png_checks.py" parameters "$png" --prompt "$app_prompt" --size 256x256 \
    --model "random weights" >"$work/app-parameters.txt" 2>&1; then
    ok "the app's PNG carries its parameters (prompt with non-ASCII text, steps, seed, size, model)"
  else
    bad "the app's PNG parameters: $(tail -c 300 "$work/app-parameters.txt")"
  fi
  window="$(app_window)"
  mkdir -p "$root/docs"
  if [ -n "$window" ] && import -window "$window" "$work/app.png" 2>/dev/null &&
    convert "$work/app.png" -strip "$root/docs/screenshot-windows-wine.png"; then
    ok "screenshot of the app's window under wine: docs/screenshot-windows-wine.png ($(identify -format '%wx%h' "$root/docs/screenshot-windows-wine.png"))"
    # No error strip (MessageBar's error colour): OpenCL and the model were found.
    pink="$("$python" "$root/tests/windows/png_checks.py" colour "$work/app.png" f8d7d5)"
    [ "$pink" -lt 500 ] || bad "the app shows an error message after generating ($pink pixels of the error colour)"
  else
    bad "no window of sdturbo.exe to take a screenshot of"
  fi
else
  bad "sdturbo.exe made no PNG in C:\\Galerie Zoë\\画廊 🌃 within 10 minutes: $(tail -c 400 "$work/app-generate.log")"
fi
close_app generate
if [ -n "$(find "$gallery_unix" -name '*.tmp*' -print -quit 2>/dev/null)" ]; then
  bad "temporary files left in the gallery after closing"
fi
stage_done app

# Bad input gets an explanation in the window (a MessageBar in its error colour) and in the log, and the app still
# closes cleanly. app_expect_error NAME LOG_TEXT ARGS...: starts the app (with $app_env, e.g. no OpenCL) and waits
# up to two minutes for both.
app_log() { find "$WINEPREFIX/drive_c/users" -path '*SD-Turbo Studio/sdturbo/logs/sdturbo.log' 2>/dev/null | head -n 1; }
app_env=()
app_expect_error() {
  local name="$1" text="$2" pink=0 found=0 before=0 log
  shift 2
  log="$(app_log)"
  [ -n "$log" ] && before="$(wc -l <"$log")"
  env "${app_env[@]}" wine "$app_win" "$@" >"$work/app-$name.log" 2>&1 &
  app_pid=$!
  for _ in $(seq 60); do
    sleep 2
    kill -0 "$app_pid" 2>/dev/null || break
    log="$(app_log)"
    [ -n "$log" ] && tail -n +"$((before + 1))" "$log" | grep -qF "$text" && found=1
    window="$(app_window)"
    if [ -n "$window" ] && import -window "$window" "$work/app-$name.png" 2>/dev/null; then
      pink="$("$python" "$root/tests/windows/png_checks.py" colour "$work/app-$name.png" f8d7d5)"
    fi
    [ "$found" -eq 1 ] && [ "$pink" -ge 2000 ] && break
  done
  if [ "$found" -eq 1 ] && [ "$pink" -ge 2000 ]; then
    ok "$name: the app explains it in its window (build/win64-test/app-$name.png) and logs '$text'"
  else
    bad "$name: error strip ${pink} px (want >= 2000), '$text' in the log: $([ "$found" -eq 1 ] && echo yes || echo no)"
  fi
  if kill -0 "$app_pid" 2>/dev/null; then
    close_app "$name"
  else
    bad "$name: sdturbo.exe ended by itself: $(tail -c 300 "$work/app-$name.log")"
    app_pid=""
  fi
}
# No OpenCL driver: wine's opencl.dll disabled, as on a Windows without one (ui/main_window_engine.cpp's advice).
app_env=(WINEDLLOVERRIDES="$no_opencl")
app_expect_error no-opencl 'OpenCL.dll could not be loaded' --model random:tiny --gallery "$gallery_win"
app_env=()
# A model that is not there: the error names it.
app_expect_error missing-model 'nope.safetensors' --model 'C:\Modèles\absent\nope.safetensors' \
  --gallery "$gallery_win"
# A gallery that cannot be written (a file where the folder should be): the image is made, saving fails, nothing
# already in the gallery is touched.
echo "not a folder" >"$WINEPREFIX/drive_c/gallery-file"
app_expect_error unwritable-gallery 'saving to the gallery failed' --model random:tiny --prompt "$app_prompt" \
  --generate --gallery 'C:\gallery-file\images'
log_file="$(app_log)"
stage_done app-bad-input

# ---- uninstall: the installed files go, the user's files stay --------------------------------------------------
mkdir -p "$inst/gallery" "$inst/models"
cp "$tiny/case0_vae.png" "$inst/gallery/kept.png" 2>/dev/null || echo kept >"$inst/gallery/kept.png"
echo "a model the user put here" >"$inst/models/kept.safetensors"
wine_run "$inst/Uninstall.exe" /S >"$work/uninstall.log" 2>&1
left="$(cd "$inst" && find . -type f | sort | tr '\n' ' ')"
if [ "$left" = "./gallery/kept.png ./models/kept.safetensors " ] && [ -z "$(find "$programs" -name '*.lnk' 2>/dev/null)" ] &&
  [ ! -e "$desktop" ] &&
  ! wine reg query "$uninstall_key" >/dev/null 2>&1; then
  ok "uninstall removed the program (Qt DLLs and plugins too), shortcuts and registry entry and kept gallery/ and models/"
else
  bad "after uninstall: files left '$left' (expected only the gallery and model files), or shortcuts/registry remain"
fi
# What the app made outside the program folder is the user's: the gallery, the settings, the log, the kernels.
if [ -n "$png" ] && [ -f "$png" ] && wine reg query "$settings_key\generation" /v width >/dev/null 2>&1 &&
  [ -f "$log_file" ]; then
  ok "uninstall kept the app's gallery (C:\\Galerie Zoë\\画廊 🌃), its settings in the registry and its log"
else
  bad "after uninstall the gallery PNG, the app's settings ($settings_key) or its log are gone"
fi
stage_done uninstall

# ---- a machine without an OpenCL driver: the installer warns, names the drivers, and installs anyway -----------
# System32\OpenCL.dll is what the driver installs (wine keeps a stand-in there). Interactively the installer shows
# a message box first; wine's "msgbox" debug channel reports its text.
system32="$WINEPREFIX/drive_c/windows/system32"
opencl_dll="$(find "$system32" -maxdepth 1 -iname opencl.dll | head -n 1)"
[ -n "$opencl_dll" ] && mv "$opencl_dll" "$work/opencl.dll.saved"
WINEDEBUG=+msgbox wine "$installer" >"$work/install-no-opencl.log" 2>&1 &
installer_pid=$!
# The box comes after the installer has unpacked itself: seconds alone, but more than 30 on a loaded two-core machine
# (once seen at "unpacking data: 51%" when the wait ended), so the wait is long and ends at the box.
for _ in $(seq 240); do
  grep -q 'trace:msgbox' "$work/install-no-opencl.log" && break
  kill -0 "$installer_pid" 2>/dev/null || break
  sleep 0.5
done
sleep 1
import -window root "$work/installer-no-opencl.png" 2>/dev/null
wineserver -k 2>/dev/null
wait "$installer_pid" 2>/dev/null
message="$(grep -a 'trace:msgbox' "$work/install-no-opencl.log" | head -n 1)"
if grep -q 'OpenCL.dll is missing' <<<"$message" && grep -q 'AMD Software: Adrenalin Edition' <<<"$message" &&
  grep -q 'NVIDIA driver' <<<"$message"; then
  ok "without System32\\OpenCL.dll the installer warns and names AMD Software: Adrenalin Edition and the NVIDIA driver"
else
  bad "no OpenCL warning from the installer (message box: ${message:-none})"
fi
stage_done installer-no-opencl-warning

# ---- the default mode for an administrator (wine's user is one): all users, HKLM; here with /D=, and still
#      without OpenCL.dll: the warning does not stop a (silent) installation -----------------------------------------
wine_run "$installer" /S '/D=C:\SDTurbo' >"$work/install-all-users.log" 2>&1
if [ -f "$WINEPREFIX/drive_c/SDTurbo/bin/sdturbo-cli.exe" ] && [ -f "$WINEPREFIX/drive_c/SDTurbo/bin/sdturbo.exe" ] &&
  wine reg query 'HKLM\Software\Microsoft\Windows\CurrentVersion\Uninstall\SD-Turbo Studio' /v InstallLocation 2>/dev/null |
  grep -q 'C:\\SDTurbo'; then
  ok "silent all-users install without OpenCL.dll into the /D= folder with an HKLM uninstall entry"
else
  bad "silent all-users install without OpenCL.dll did not reach C:\\SDTurbo with an HKLM entry"
fi
[ -f "$work/opencl.dll.saved" ] && mv "$work/opencl.dll.saved" "$system32/opencl.dll"
stage_done install-all-users

finish
