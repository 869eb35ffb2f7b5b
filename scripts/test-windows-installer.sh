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
