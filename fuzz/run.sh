#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) in build-fuzz/ and fuzzes
# each for $FUZZ_SECONDS (default 45) from fuzz/corpus/TARGET/. Fails on any crash;
# the input that did it is kept in build-fuzz/fuzz/artifacts/.
#
#   fuzz/run.sh                      all targets
#   FUZZ_SECONDS=600 fuzz/run.sh     longer, by hand
#   build-fuzz/fuzz/fuzz_cli FILE    replay one input
set -eu
cd "$(dirname "$0")/.."
if [ ! -d build-fuzz ]; then
    CC=clang CXX=clang++ meson setup build-fuzz -Dfuzzing=true -Dtests=false -Dman=disabled \
        -Dcompletions=false -Dbuildtype=debugoptimized
fi
ninja -C build-fuzz
meson test -C build-fuzz --no-rebuild --print-errorlogs --suite fuzz --num-processes "$(nproc 2>/dev/null || echo 2)"
