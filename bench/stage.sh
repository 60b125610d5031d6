#!/bin/sh
# The bwrap stage alone (issue 14), without bwrap in the way: bwrap's own
# start (namespaces, mounts; 10+ ms here, and noisy) dwarfs the stage's work
# in bench/run.sh's rows. Here the stage runs in a private mount namespace
# whose root is bind-mounted read-only (what the stage checks bwrap did), as
# root, against:
#   - a bare static exec in its place (the exec floor): what one more exec costs;
#   - stage-floor (bench/stage_floor.cpp): the stage's system calls and nothing
#     else, all of them and by group: what the kernel charges for the
#     confinement itself;
#   - the stage, and --baseline's stage (an earlier build) if given.
# Rows interleaved (bench/interleave.py); prints each row's cost over the
# bare exec.
#
#   sudo bench/stage.sh [--binary PATH] [--baseline PATH] [--build DIR] [--runs N] [--warmup N]
#
# --build: the build directory holding seccomp_filters.h (default: the
# binary's directory, else build-bench/, which bench/run.sh makes).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
bin="$src/build-bench/dsh-confine"
baseline=""
builddir=""
runs=500
warmup=20
while [ $# -gt 0 ]; do
    case "$1" in
        --binary) bin=$2; shift 2 ;;
        --baseline) baseline=$(realpath "$2"); shift 2 ;;
        --build) builddir=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --warmup) warmup=$2; shift 2 ;;
        -h|--help) sed -n "2,20p" "$0"; exit 0 ;;
        *) echo "bench/stage.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "bench/stage.sh: needs root (a private mount namespace)" >&2; exit 2; }
bin=$(realpath "$bin")
[ -n "$builddir" ] || builddir=$(dirname "$bin")
[ -f "$builddir/seccomp_filters.h" ] || { echo "bench/stage.sh: no seccomp_filters.h in $builddir (--build DIR)" >&2; exit 2; }

scratch=$(mktemp -d /var/tmp/dsh-stage-bench.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
cc -O2 -static -o "$scratch/exec-floor" "$here/exec_floor.c"
cp "$scratch/exec-floor" "$scratch/bare-exec"
c++ -std=c++17 -O2 -static -I"$builddir" -I"$src/src" -o "$scratch/stage-floor" "$here/stage_floor.cpp"
# Fresh copies, as an install puts them: how a file was written decides how
# it sits in the page cache (the linker's output paged in 0.4 ms slower than
# a cp of the same bytes here).
cp "$bin" "$scratch/dsh-confine"
bin="$scratch/dsh-confine"
if [ -n "$baseline" ]; then cp "$baseline" "$scratch/dsh-confine-baseline"; baseline="$scratch/dsh-confine-baseline"; fi

# The stage's command line as a read-only run plans it, with the kernel's Landlock ABI.
abi=$("$bin" --runner landlock --report-fd 3 -- /bin/true 3>&1 >/dev/null 2>&1 |
      python3 -c 'import json,sys; print(next((r.get("landlockAbi") or 0 for r in map(json.loads, sys.stdin) if r.get("type") == "confinement"), 0))' || echo 0)
ll=""
[ "$abi" -gt 0 ] 2>/dev/null && ll="--landlock $abi"
stage_args="__dsh_confine_stage_v1 --mode read-only $ll --record-fd 5 --file /dev/null -- /bin/true /bin/true"
F="$scratch/exec-floor --record 5"
{
    printf '%s\n%s\n' "bare exec in the stage's place" "$F $scratch/bare-exec /bin/true"
    printf '%s\n%s\n' "stage floor: seccomp only" "$F $scratch/stage-floor S /bin/true"
    printf '%s\n%s\n' "stage floor: all but seccomp" "$F $scratch/stage-floor MFLC /bin/true"
    printf '%s\n%s\n' "stage floor: all its system calls" "$F $scratch/stage-floor MFLCS /bin/true"
    printf '%s\n%s\n' "stage" "$F $bin $stage_args"
    [ -z "$baseline" ] || printf '%s\n%s\n' "baseline stage" "$F $baseline $stage_args"
} > "$scratch/cmds"

# Private mount namespace: / read-only (the stage's mount-view check), and the
# device nodes the stage remounts as root made mount points, as bwrap's are.
cat > "$scratch/inside.sh" <<INSIDE
set -e
mount --make-rprivate /
mount --bind / / && mount -o remount,bind,ro / /
for n in null zero full random urandom tty console; do [ -e /dev/\$n ] && mount --bind /dev/\$n /dev/\$n; done
python3 "$here/interleave.py" "$scratch/cmds" /dev/shm/dsh-stage-bench.json --runs "$runs" --warmup "$warmup" >/dev/null
INSIDE
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
unshare -m sh "$scratch/inside.sh"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
mv /dev/shm/dsh-stage-bench.json "$scratch/times.json"
python3 - "$scratch/times.json" "$runs" "$load_before" "$load_after" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
t = {r["command_name"]: sorted(r["times"]) for r in res}
q = lambda v, f: v[int(len(v) * f)] * 1e3
base = t["bare exec in the stage's place"]
print(f"{sys.argv[2]} interleaved runs; load average {sys.argv[3]} before, {sys.argv[4]} after.")
print()
print("| row | median (ms) | p25 (ms) | over the bare exec, median | over the bare exec, p25 |")
print("|---|---:|---:|---:|---:|")
for r in res:
    v = t[r["command_name"]]
    print(f"| {r['command_name']} | {q(v, .5):.2f} | {q(v, .25):.2f} | {q(v, .5) - q(base, .5):+.2f} ms | "
          f"{q(v, .25) - q(base, .25):+.2f} ms |")
PY
