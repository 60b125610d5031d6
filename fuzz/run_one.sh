#!/bin/sh
# run_one.sh FUZZER SEED-CORPUS ARTIFACT-DIR: fuzzes for $FUZZ_SECONDS (default 45)
# starting from the corpus kept in the repo (read, never written: new inputs go
# to a scratch corpus), and prints one TAP line with the figures. Any crash,
# sanitizer report, leak or slow input fails, and the input that did it is kept
# in ARTIFACT-DIR, and printed in hex, to reproduce with `FUZZER FILE`.
set -u
fuzzer=$1 seeds=$2 artifacts=$3
secs=${FUZZ_SECONDS:-45}
name=$(basename "$fuzzer")
work=$(mktemp -d "/var/tmp/dsh-fuzz-$name.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$artifacts"
echo "1..1"
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}abort_on_error=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$name-" "$work/corpus" "$seeds" >"$work/log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -1)
files=$(ls "$work/corpus" | wc -l)
if [ "$rc" -eq 0 ]; then
    echo "ok 1 - $name: ${execs:-?} execs in ${secs} s, $cov, $files new corpus inputs, no crash"
    exit 0
fi
echo "not ok 1 - $name: libFuzzer exit $rc after ${execs:-?} execs"
sed 's/^/# /' "$work/log" | tail -60
for f in "$artifacts/$name-"*; do
    [ -f "$f" ] || continue
    echo "# artifact $f:"
    od -An -c "$f" | head -20 | sed 's/^/#   /'
done
exit 1
