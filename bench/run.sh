#!/bin/sh
# dsh-confine benchmarks (issue 8). Measures, side by side in ONE hyperfine
# run, the cost of starting a command under dsh-confine against the floor
# (`env /bin/true`) and against bubblewrap called directly with the same
# profile; then binary sizes and peak memory. Writes the raw hyperfine JSON
# and a Markdown table into the output directory.
#
#   bench/run.sh [--binary PATH] [--dynamic PATH|--no-dynamic] [--baseline PATH]
#                [--runs N] [--warmup N] [--out DIR] [--interleave] [--only PREFIX]
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
# --only PREFIX times only the rows whose name starts with PREFIX ("carve:"
# for the carve-out rows); the targets whose rows are missing say so.
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
only=""
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
        --only) only=$2; shift 2 ;;
        -h|--help) sed -n "2,21p" "$0"; exit 0 ;;
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
add() {
    case "$1" in
        "$only"*) printf '%s\n%s\n' "$1" "$2" >> "$cmds" ;;
    esac
}

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
# Binds from a descriptor of the launcher's (a writable root, a carve-out)
# by path instead: the timed rows do not hold those descriptors; the mounts
# are the same.
i = 1
while i < len(argv) and argv[i] != "--":
    if argv[i] in ("--bind", "--ro-bind") and argv[i + 1].startswith("/proc/self/fd/"):
        argv[i + 1] = argv[i + 2]
        i += 3
        continue
    i += 1
# The stage is what follows bwrap's own "--" (not a bind source).
stage = i + 1 if i + 1 < len(argv) and argv[i + 1].startswith("/proc/self/fd/") else None
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

# Carve-outs (issue 18): the bwrap row for a repository with a linked
# worktree and two submodules (some 30 protected names, 8 of them bound)
# against the same row for a plain directory; and bwrap alone, run with the
# profile dsh-confine built for the repository, with and without the
# carve-out binds: what bwrap's own mounts cost, a floor that no work in
# dsh-confine can lower. Sources are given by path (the timed rows have no
# descriptor of ours): the same mounts.
carve="$scratch/carve"
carve_git() { GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@example.invalid \
    GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@example.invalid \
    git -c protocol.file.allow=always -c init.defaultBranch=main "$@" >/dev/null 2>&1; }
carve_repo() {
    mkdir -p "$carve/plain" || return 1
    for r in sub1 sub2 repo; do
        carve_git init -q "$carve/$r" && echo x > "$carve/$r/f" && carve_git -C "$carve/$r" add f &&
            carve_git -C "$carve/$r" commit -q -m one || return 1
    done
    carve_git -C "$carve/repo" submodule add "$carve/sub1" sub1 &&
        carve_git -C "$carve/repo" submodule add "$carve/sub2" sub2 &&
        carve_git -C "$carve/repo" commit -q -m subs &&
        carve_git -C "$carve/repo" worktree add -q "$carve/wt" -b wt
}
if ! command -v git >/dev/null; then
    na "carve: dsh bwrap, repository" "no git to make the repository"
elif ! carve_repo; then
    na "carve: dsh bwrap, repository" "git could not make a repository with a worktree and two submodules"
elif works "carve: dsh bwrap, repository" "$D" --mode workspace-write --root "$carve/repo" --runner bwrap -- /bin/true; then
    add "carve: dsh bwrap, plain directory" "$D --mode workspace-write --root $carve/plain --runner bwrap -- /bin/true"
    add "carve: dsh bwrap, repository" "$D --mode workspace-write --root $carve/repo --runner bwrap -- /bin/true"
    if [ -n "$baseline" ]; then
        add "carve: baseline dsh bwrap, plain directory" "$baseline --mode workspace-write --root $carve/plain --runner bwrap -- /bin/true"
        add "carve: baseline dsh bwrap, repository" "$baseline --mode workspace-write --root $carve/repo --runner bwrap -- /bin/true"
    fi
    if "$D" --runner bwrap --mode workspace-write --root "$carve/repo" --report-fd 3 -- /bin/true \
        3>"$scratch/carve.json" >/dev/null 2>&1 &&
        python3 - "$scratch/carve.json" "$carve/repo" > "$scratch/carve.argv" <<'PY'
import json, shlex, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
c = next(r for r in recs if r.get("type") == "confinement")
argv = c.get("execArgv") or c["argv"]
if len(argv) > 2 and argv[1] == "--json-status-fd": argv = argv[:1] + argv[3:]
end = next(i for i in range(1, len(argv)) if argv[i - 1] == "--")  # bwrap's "--": the stage or command follows
profile, repo = argv[:end - 1], sys.argv[2]
full, roots, i, carved = [], [], 0, 0
while i < len(profile):
    a = profile[i]
    if a in ("--bind", "--ro-bind") and profile[i + 1].startswith("/proc/self/fd/"):
        pair = [a, profile[i + 2], profile[i + 2]]
        full += pair
        if profile[i + 2].startswith(repo + "/"): carved += 1
        else: roots += pair
        i += 3
        continue
    full.append(a); roots.append(a); i += 1
if carved == 0: sys.exit(1)
print(shlex.join(full + ["--", "/bin/true"])); print(shlex.join(roots + ["--", "/bin/true"])); print(carved)
PY
    then
        add "carve: bwrap direct, repository, roots only" "$(sed -n 2p "$scratch/carve.argv")"
        add "carve: bwrap direct, repository, with the carve-out binds" "$(sed -n 1p "$scratch/carve.argv")"
        echo "carve_binds=$(sed -n 3p "$scratch/carve.argv")" > "$scratch/carve.txt"
    else
        na "carve: bwrap direct, repository, roots only" "no bwrap profile with carve-out binds in the report"
    fi
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
    [ -f "$scratch/carve.txt" ] && cat "$scratch/carve.txt"
    echo "timer=$([ "$interleave" = 1 ] && echo "bench/interleave.py (rows interleaved, random order each round)" || echo "hyperfine -N")"
} > "$out/machine.txt"

python3 "$here/report.py" "$out"
echo
echo "raw data: $out"
