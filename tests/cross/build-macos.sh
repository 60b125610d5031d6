#!/bin/sh
# Cross-compiles and links dsh-confine for macOS with zig, every warning an
# error, and checks that the result is a Mach-O executable for ARCH:
#   tests/cross/build-macos.sh aarch64|x86_64 [BUILD_DIR]
#     (default BUILD_DIR: build-macos-ARCH in the source tree)
# The executable is built, never run: this CI has no macOS host.
#
# zig's cache (its libc++ for the target, its clang's outputs) is kept in the
# build dir (ZIG_GLOBAL_CACHE_DIR, unless set): a fresh tree pays for building
# libc++ once per target (about 2 of the minutes), a rerun does not.
#
# Unity (six sources a compile): the headers are parsed once a group, not once
# a file; the release build still compiles each file alone.
#
# -O0: clang's warnings come from its front end and do not depend on the
# optimiser, and a binary that is never run gains nothing from -O3, which
# costs about 40% more compile time here.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
arch=${1:?usage: build-macos.sh aarch64|x86_64 [BUILD_DIR]}
case $arch in
  aarch64) want='Mach-O 64-bit arm64 executable' ;;
  x86_64) want='Mach-O 64-bit x86_64 executable' ;;
  *) echo "build-macos.sh: unknown arch '$arch' (aarch64 or x86_64)" >&2; exit 2 ;;
esac
build=${2:-"$src/build-macos-$arch"}

. "$src/tests/cross/zig.sh"

: "${ZIG_GLOBAL_CACHE_DIR:=$build/zig-cache}"
export ZIG_GLOBAL_CACHE_DIR

if [ ! -f "$build/build.ninja" ]; then
  mkdir -p "$build"
  # The cross file calls cross/zig by an absolute path that it cannot know
  # itself (meson 1.0 has no @DIRNAME@): this first cross file tells it.
  printf "[constants]\ncross_dir = '%s'\n" "$src/cross" > "$build/cross-dir.ini"
  meson setup --cross-file "$build/cross-dir.ini" --cross-file "$src/cross/$arch-macos.ini" \
    -Dwerror=true -Doptimization=0 -Ddebug=false -Dtests=false --unity on -Dunity_size=6 "$build" "$src"
fi
ninja -C "$build"
exe=$build/dsh-confine
test -f "$exe" || { echo "missing $exe" >&2; exit 1; }
got=$(file -b "$exe")
case $got in
  "$want"*) echo "built: $exe: $got" ;;
  *) echo "$exe is not a $want: $got" >&2; exit 1 ;;
esac
