#!/bin/sh
# Cross-compiles dsh-confine.exe and dsh-confine-acl-run.exe with mingw-w64,
# every warning an error. Run from anywhere:
#   tests/cross/build-windows.sh [BUILD_DIR]     (default: build-win in the source tree)
# The executables are built, not run: this CI has no Windows host. Unity (six
# sources a compile): the headers are parsed once a group, not once a file.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-"$src/build-win"}
if ! command -v x86_64-w64-mingw32-g++ >/dev/null; then
  echo "x86_64-w64-mingw32-g++ not found (apt install mingw-w64 g++-mingw-w64-x86-64)" >&2
  # A skip (77) for a developer; a failure in CI (DSH_CONFINE_MUST_WORK=1).
  [ "${DSH_CONFINE_MUST_WORK:-0}" = 1 ] && exit 1
  exit 77
fi
if [ ! -f "$build/build.ninja" ]; then
  meson setup --cross-file "$src/cross/mingw-w64.ini" -Dwerror=true -Dtests=false --unity on -Dunity_size=6 "$build" "$src"
fi
ninja -C "$build"
for f in dsh-confine.exe dsh-confine-acl-run.exe; do
  test -f "$build/$f" || { echo "missing $build/$f" >&2; exit 1; }
done
echo "built: $build/dsh-confine.exe $build/dsh-confine-acl-run.exe"
