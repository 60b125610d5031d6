#!/bin/sh
# dsh-confine benchmarks (issue 8). Measures, side by side in ONE hyperfine
# run, the cost of starting a command under dsh-confine against the floor
# (`env /bin/true`) and against bubblewrap called directly with the same
# profile; then binary sizes and peak memory. Writes the raw hyperfine JSON
# and a Markdown table into the output directory.
#
#   bench/run.sh [--binary PATH] [--dynamic PATH|--no-dynamic] [--baseline PATH]
#                [--runs N] [--warmup N] [--out DIR] [--interleave]
#
# Results go to bench/out/ unless --out is given.
# Without --binary a release build (static: the default) is made in
# build-bench/, and a libc-dynamic one (-Dstatic=false) in build-bench-dynamic/
# unless --no-dynamic or --dynamic is given. Rows whose feature the binary
# does not have (a runner, --supervise, probe) are printed as "not available"
# instead of failing the run. The exec floor (bench/exec_floor.c: a static
# program that only execs its arguments) is built with cc when there is one.
# --baseline PATH adds another dsh-confine (an earlier build) to the same run:
# its landlock and auto rows and its bwrap stage, for a before/after table.
# --interleave times the rows with bench/interleave.py instead of hyperfine:
# every round runs every row once, in random order (for a shared, noisy host).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
bin=""
dynamic=""
no_dynamic=0
baseline=""
interleave=0
runs=200
warmup=20
out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --binary) bin=$2; shift 2 ;;
        --dynamic) dynamic=$2; shift 2 ;;
        --no-dynamic) no_dynamic=1; shift ;;
        --baseline) baseline=$(realpath "$2"); shift 2 ;;
        --interleave) interleave=1; shift ;;
        --runs) runs=$2; shift 2 ;;
        --warmup) warmup=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n "2,19p" "$0"; exit 0 ;;
        *) echo "bench/run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

tools="python3"
[ "$interleave" = 1 ] || tools="hyperfine $tools"
for tool in $tools; do
    command -v "$tool" >/dev/null || { echo "bench/run.sh: $tool is needed" >&2; exit 2; }
done

build() {  # build DIR [meson options...]
    dir=$1; shift
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" "$src" --buildtype=release -Dtests=false "$@" >/dev/null
    fi
    ninja -C "$dir" dsh-confine >/dev/null
    echo "$dir/dsh-confine"
}
if [ -z "$bin" ]; then bin=$(build "$src/build-bench"); fi
if [ -z "$dynamic" ] && [ "$no_dynamic" = 0 ]; then
    dynamic=$(build "$src/build-bench-dynamic" -Dstatic=false) || dynamic=""
fi
bin=$(realpath "$bin")
[ -n "$dynamic" ] && dynamic=$(realpath "$dynamic")

# Scratch under /var/tmp: /tmp is a writable root (and a tmpfs under bwrap).
scratch=$(mktemp -d /var/tmp/dsh-bench.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
# Every dsh-confine timed is a fresh copy, as `meson install` or a package
# puts it: how a file was written decides how it sits in the page cache, and
# that alone moved the stage by 0.4 ms here (the linker's output in build/
# against a cp of the same bytes; issue 14). Copies make the rows comparable.
mkdir "$scratch/bin"
cp "$bin" "$scratch/bin/dsh-confine"
bin_src=$bin
bin="$scratch/bin/dsh-confine"
if [ -n "$dynamic" ]; then cp "$dynamic" "$scratch/bin/dsh-confine-dynamic"; dynamic="$scratch/bin/dsh-confine-dynamic"; fi
baseline_src=$baseline
if [ -n "$baseline" ]; then cp "$baseline" "$scratch/bin/dsh-confine-baseline"; baseline="$scratch/bin/dsh-confine-baseline"; fi
ws="$scratch/ws"
mkdir -p "$ws"
[ -n "$out" ] || out="$src/bench/out"
mkdir -p "$out"
out=$(realpath "$out")
cd "$ws"

loop='for i in $(seq 200); do echo x > f$i; done'
notes="$out/notes.txt"
: > "$notes"
na() { printf '%s\t%s\n' "$1" "$2" >> "$notes"; }

# works NAME ARGS...: runs dsh-confine once; a non-zero exit means the row is
# not available here (the first line of stderr says why).
works() {
    name=$1; shift
    if err=$("$@" 2>&1 >/dev/null); then return 0; fi
    na "$name" "$(printf '%s' "$err" | head -n 1)"
    return 1
}

cmds="$scratch/cmds"
: > "$cmds"
add() { printf '%s\n%s\n' "$1" "$2" >> "$cmds"; }

D="$bin"
add "/bin/true" "/bin/true"
add "env /bin/true" "env /bin/true"
for runner in landlock bwrap auto; do
    if works "dsh $runner" "$D" --runner "$runner" -- /bin/true; then
        add "dsh $runner" "$D --runner $runner -- /bin/true"
        if works "dsh $runner --supervise" "$D" --supervise --runner "$runner" -- /bin/true; then
            add "dsh $runner --supervise" "$D --supervise --runner $runner -- /bin/true"
        fi
    fi
done
# The network axis (issue 17): --net off beside the rows without it, same run.
for runner in landlock bwrap; do
    if works "dsh $runner --net off" "$D" --runner "$runner" --net off -- /bin/true; then
        add "dsh $runner --net off" "$D --runner $runner --net off -- /bin/true"
    fi
done
# --net allow= (issue 19): the listener made inside and handed out, the proxy
# started in the parent; beside --net off, same run. No connection is made.
for runner in bwrap; do
    if works "dsh $runner --net allow" "$D" --runner "$runner" --net allow=allowed.test -- /bin/true; then
        add "dsh $runner --net allow" "$D --runner $runner --net allow=allowed.test -- /bin/true"
    fi
done
# --net loopback on the Landlock runner: its own network namespace (and a
# user namespace when not root), checked once at plan time and made again in
# the command's process.
if works "dsh landlock --net loopback" "$D" --runner landlock --net loopback -- /bin/true; then
    add "dsh landlock --net loopback" "$D --runner landlock --net loopback -- /bin/true"
fi
if [ -n "$dynamic" ]; then
    for runner in landlock auto; do
        if works "dsh-dynamic $runner" "$dynamic" --runner "$runner" -- /bin/true; then
            add "dsh-dynamic $runner" "$dynamic --runner $runner -- /bin/true"
        fi
    done
fi
if [ -n "$baseline" ]; then
    for runner in landlock auto; do
        if works "baseline dsh $runner" "$baseline" --runner "$runner" -- /bin/true; then
            add "baseline dsh $runner" "$baseline --runner $runner -- /bin/true"
        fi
    done
fi
# The floor for a launcher that execs once, and for one in front of bwrap:
# a static program that does nothing but exec its arguments.
floor=""
if cc -O2 -static -o "$scratch/exec-floor" "$here/exec_floor.c" 2>/dev/null; then
    floor="$scratch/exec-floor"
    add "exec floor /bin/true" "$floor /bin/true"
    add "spawn-and-wait floor /bin/true" "$floor --wait /bin/true"
else
    na "exec floor /bin/true" "no static C compiler (cc -static) to build bench/exec_floor.c"
fi

# The bwrap profile dsh-confine builds, taken from its own report (the
# confinement record's execArgv): with the Landlock stage (our binary exec'd
# by bwrap, given by path instead of the inherited /proc/self/fd/N) and
# without. The stage runs only with the launcher's record memfd on its
# --record-fd (a command line cannot hand one over), so every row with the
# stage starts through the exec floor's --record, which makes that memfd;
# the rows it is compared with start the same way.
direct() {  # direct MODE-ARGS... -> "record-fd|with-stage-argv|no-stage-argv|bare-exec-stage-argv" lines (shell-quoted)
    "$D" --runner bwrap --report-fd 3 "$@" 3>"$scratch/report.json" >/dev/null 2>&1 || return 1
    python3 - "$scratch/report.json" "$D" "${floor:-}" <<'PY'
import json, shlex, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
c = next((r for r in recs if r.get("type") == "confinement"), None)
if not c or c.get("runner") != "bwrap": sys.exit(1)
argv = c.get("execArgv") or c["argv"]
if not argv or not argv[0].endswith("bwrap"): sys.exit(1)
# The launcher's status pipe (read by dsh-confine, bwrap's parent) is not
# open in a timed row: bwrap direct runs without it.
if len(argv) > 2 and argv[1] == "--json-status-fd": argv = argv[:1] + argv[3:]
stage = next((i for i, a in enumerate(argv) if a.startswith("/proc/self/fd/")), None)
if stage is None:                       # no inner stage: the argv is bwrap's own
    print("-"); print(shlex.join(argv)); print(shlex.join(argv)); print(shlex.join(argv)); sys.exit(0)
# The stage: <self> __dsh_confine_stage_v1 OPTIONS -- COMMAND_PATH ARGV...
rest = argv[stage + 1:]
end = rest.index("--")                  # the stage's own "--" ends its options
opts, path, args = rest[:end], rest[end + 1], rest[end + 2:]
# Without --report-fd (as the timed rows run) there is no report; the record
# fd stays (the exec floor's --record puts a memfd there).
kept, record_fd, i = [], None, 0
while i < len(opts):
    if opts[i] == "--report-fd":
        i += 2
        continue
    if opts[i] == "--record-fd":
        record_fd = opts[i + 1]
    kept.append(opts[i]); i += 1
if record_fd is None: sys.exit(1)
with_stage = argv[:stage] + [sys.argv[2]] + kept + ["--", path] + args
print(record_fd)
print(shlex.join(with_stage)); print(shlex.join(argv[:stage] + [path] + args[1:]))
print(shlex.join(argv[:stage] + [sys.argv[3] or "/nonexistent", path] + args[1:]))
PY
}
if out_argv=$(direct -- /bin/true); then
    rfd=$(echo "$out_argv" | sed -n 1p)
    add "bwrap direct" "$(echo "$out_argv" | sed -n 3p)"
    if [ -n "$floor" ] && [ "$rfd" != "-" ]; then
        # The same bwrap behind the same launcher floor, three ways: the
        # command alone; a bare static exec (the exec floor itself) where
        # the stage goes, i.e. what one more exec costs inside bwrap; the stage.
        add "exec floor + bwrap direct" "$floor --record $rfd $(echo "$out_argv" | sed -n 3p)"
        add "exec floor + bwrap direct, bare exec in place of the stage" "$floor --record $rfd $(echo "$out_argv" | sed -n 4p)"
        add "exec floor + bwrap direct, with stage" "$floor --record $rfd $(echo "$out_argv" | sed -n 2p)"
        if [ -n "$baseline" ]; then
            add "exec floor + bwrap direct, with baseline stage" \
                "$floor --record $rfd $(echo "$out_argv" | sed -n 2p | sed "s#$D#$baseline#")"
        fi
    fi
else
    na "bwrap direct" "dsh-confine has no bwrap runner here (no bwrap confinement record)"
fi
if works "dsh probe" "$D" probe; then add "dsh probe" "$D probe"; fi

# The same 200 writes inside the workspace.
wsargs="--mode workspace-write --root $ws"
add "loop: env" "env sh -c '$loop'"
for runner in landlock bwrap auto; do
    if works "loop: dsh $runner" "$D" $wsargs --runner "$runner" -- /bin/true; then
        add "loop: dsh $runner" "$D $wsargs --runner $runner -- sh -c '$loop'"
        if works "loop: dsh $runner --supervise" "$D" $wsargs --supervise --runner "$runner" -- /bin/true; then
            add "loop: dsh $runner --supervise" "$D $wsargs --supervise --runner $runner -- sh -c '$loop'"
        fi
    fi
done
if out_argv=$(direct $wsargs -- sh -c "$loop"); then
    add "loop: bwrap direct" "$(echo "$out_argv" | sed -n 3p)"
fi

# One hyperfine run: every row shares the same machine state.
set --
while IFS= read -r name && IFS= read -r cmd; do
    set -- "$@" -n "$name" "$cmd"
done < "$cmds"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
if [ "$interleave" = 1 ]; then
    python3 "$here/interleave.py" "$cmds" "$out/hyperfine.json" --runs "$runs" --warmup "$warmup" \
        > "$out/hyperfine.txt" 2>&1 || { cat "$out/hyperfine.txt" >&2; exit 1; }
else
    hyperfine -N --style basic --warmup "$warmup" --runs "$runs" --export-json "$out/hyperfine.json" "$@" \
        > "$out/hyperfine.txt" 2>&1 || { cat "$out/hyperfine.txt" >&2; exit 1; }
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# The allow-list (issue 19): the first byte of a connection through the proxy
# against a direct one to the same loopback server (bench/first_byte.py), in
# alternating batches of 50 (direct on the host, then proxied inside one
# dsh-confine run), 10 rounds. allowed.test is mapped by the proxy's hosts hook.
fb="$out/first_byte.tsv"
: > "$fb"
if works "first byte: dsh bwrap --net allow" "$D" --runner bwrap --net allow=allowed.test -- /bin/true; then
    python3 "$here/first_byte.py" serve "$scratch/fb.port" &
    fb_pid=$!
    trap 'kill "$fb_pid" 2>/dev/null || true; rm -rf "$scratch"' EXIT
    i=0
    while [ ! -s "$scratch/fb.port" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    fb_port=$(cat "$scratch/fb.port")
    printf '127.0.0.1 allowed.test\n' > "$scratch/fb.hosts"
    chmod 644 "$scratch/fb.hosts"
    for round in $(seq 10); do
        python3 "$here/first_byte.py" direct "$fb_port" 50 | sed 's/^/direct\t/' >> "$fb"
        DSH_CONFINE_NET_HOSTS="$scratch/fb.hosts" "$D" --runner bwrap --net "allow=allowed.test,127.0.0.1:$fb_port" \
            -- python3 "$here/first_byte.py" proxied allowed.test "$fb_port" 50 | sed 's/^/proxied\t/' >> "$fb"
    done
    kill "$fb_pid" 2>/dev/null || true
fi

# Peak RSS (KiB) from /usr/bin/time -v. In exec mode the process becomes the
# command, and the kernel keeps the larger high-water mark of the two images
# (exec_mmap records the old mm's), so with /bin/true (about 1 MB) it is
# dsh-confine's own peak. Two cross-checks: a run that fails inside
# dsh-confine after the full setup path (command not found), and supervise
# mode (the parent; the reaped child's mark is folded in, and is smaller).
rss() { /usr/bin/time -v "$@" 2>&1 >/dev/null | sed -n 's/.*Maximum resident set size (kbytes): //p' | tail -n 1; }
{
    printf 'true\t%s\n' "$(rss /bin/true)"
    printf 'env\t%s\n' "$(rss env /bin/true)"
    printf 'exec\t%s\n' "$(rss "$D" --runner landlock -- /bin/true)"
    printf 'notfound\t%s\n' "$(rss "$D" --runner landlock -- /nonexistent/cmd)"
    printf 'supervise\t%s\n' "$(rss "$D" --supervise --runner landlock -- /bin/true)"
    [ -n "$dynamic" ] && printf 'dynamic-exec\t%s\n' "$(rss "$dynamic" --runner landlock -- /bin/true)"
    true
} > "$out/rss.tsv"

stripped_size() { cp "$1" "$scratch/s" && strip "$scratch/s" && stat -c %s "$scratch/s"; }
{
    printf 'shipped\t%s\t%s\t%s\n' "$(stat -c %s "$bin")" "$(stripped_size "$bin")" "$(readelf -l "$bin" 2>/dev/null | grep -q INTERP && echo dynamic || echo static)"
    [ -n "$dynamic" ] && printf 'dynamic\t%s\t%s\tdynamic\n' "$(stat -c %s "$dynamic")" "$(stripped_size "$dynamic")"
    true
} > "$out/size.tsv"

{
    echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "kernel=$(uname -r)"
    echo "cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
    echo "cores=$(nproc)"
    echo "load_before=$load_before"
    echo "load_after=$load_after"
    echo "binary=$bin_src (timed as a fresh copy)"
    echo "dynamic=$dynamic"
    echo "baseline=$baseline_src"
    echo "baseline_version=$([ -n "$baseline" ] && "$baseline" --version 2>/dev/null | head -n 1)"
    echo "version=$("$D" --version 2>/dev/null | head -n 1)"
    echo "runs=$runs"
    echo "warmup=$warmup"
    echo "timer=$([ "$interleave" = 1 ] && echo "bench/interleave.py (rows interleaved, random order each round)" || echo "hyperfine -N")"
} > "$out/machine.txt"

python3 "$here/report.py" "$out"
echo
echo "raw data: $out"
