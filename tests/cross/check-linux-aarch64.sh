#!/bin/sh
# Compiles the Linux sources that hold code for one architecture for aarch64
# with zig, every warning an error (the release and sanitizer builds are
# x86_64 and never see the aarch64 branches):
#   tests/cross/check-linux-aarch64.sh BUILD_ROOT OUT_DIR
# BUILD_ROOT is a configured build of this tree (for seccomp_filters.h and the
# like); OUT_DIR gets the objects. Compiled, never linked or run.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: check-linux-aarch64.sh BUILD_ROOT OUT_DIR}
out=${2:?usage: check-linux-aarch64.sh BUILD_ROOT OUT_DIR}
. "$src/tests/cross/zig.sh"
mkdir -p "$out/header-only"
: "${ZIG_GLOBAL_CACHE_DIR:=$out/zig-cache}"
: "${ZIG_LOCAL_CACHE_DIR:=$out/zig-cache}"
export ZIG_GLOBAL_CACHE_DIR ZIG_LOCAL_CACHE_DIR
# Only the header-only libraries and libseccomp's (target-neutral) headers of
# the build machine; everything else comes from zig's aarch64 glibc and kernel headers.
for h in fmt nlohmann CLI seccomp.h seccomp-syscalls.h; do
  test -e "/usr/include/$h" || missing "/usr/include/$h not found (.ci/packages)"
  ln -sfn "/usr/include/$h" "$out/header-only/$h"
done
# clang knows gcc's no_stack_protector only as its own spelling: the x86_64
# clang build warns the same; gcc builds the shipped binary.
status=0
for f in src/supervise.cpp src/linux/seccomp_build.cpp; do
  o=$out/$(basename "$f" .cpp).o
  if "$ZIG" c++ -target aarch64-linux-gnu -std=c++17 -O0 -c -o "$o" \
      -Wall -Wextra -Wpedantic -Werror -Wno-unknown-attributes -Wno-missing-field-initializers -Wno-c99-extensions \
      -DFMT_HEADER_ONLY -DDSH_CONFINE_VERSION='"check"' -DDSH_CONFINE_BWRAP_PATH='"/usr/bin/bwrap"' \
      -I"$src/src" -I"$build" -idirafter "$out/header-only" "$src/$f"; then
    case $(file -b "$o") in
      *"ARM aarch64"*) echo "compiled for aarch64: $f" ;;
      *) echo "$o is not an aarch64 object: $(file -b "$o")" >&2; status=1 ;;
    esac
  else
    echo "does not compile for aarch64: $f" >&2
    status=1
  fi
done
exit $status
