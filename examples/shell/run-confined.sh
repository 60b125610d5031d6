#!/bin/sh
# Calling dsh-confine from a shell script.
#
# run_confined MODE ROOT COMMAND [ARG...] runs the command under
# `dsh-confine --supervise`, with the report on fd 3 read from a pipe, and
# sets:
#   status  the exit status (the command's own, or 125/126/127, see below)
#   denied  "true" when the sandbox stopped a write (the result record says so)
#   error   the error code when dsh-confine did not run the command, else ""
# The report is compact JSON, one object per line, so grep and sed can read
# the few members a script needs without a JSON tool.
#
# `sh run-confined.sh --self-test` runs a short demonstration that checks
# itself (it is part of dsh-confine's test suite). DSH_CONFINE names the binary.

DSH_CONFINE=${DSH_CONFINE:-dsh-confine}

run_confined() {
    _mode=$1 _root=$2
    shift 2
    # The report on a pipe (the command substitution's), read while the
    # command runs; the command's stdout stays ours (fd 4). Not a file in
    # /tmp or the workspace: the command could rewrite one there, and
    # dsh-confine refuses such a report fd.
    exec 4>&1
    _report=$({ "$DSH_CONFINE" --supervise --report-fd 3 --mode "$_mode" --root "$_root" -- "$@" 3>&1 1>&4 4>&-
                echo "status $?"; })
    exec 4>&-
    status=$(printf '%s\n' "$_report" | sed -n 's/^status \([0-9]*\)$/\1/p')
    # Members of the record of one type: the line that starts with it.
    denied=false
    printf '%s\n' "$_report" | grep '^{"type":"result"' | grep -q '"denied":true' && denied=true
    error=$(printf '%s\n' "$_report" | grep '^{"type":"error"' | sed -n 's/.*"code":"\([A-Z_]*\)".*/\1/p')
    return "$status"
}

self_test() {
    ws=$(mktemp -d /var/tmp/dsh-example-sh-XXXXXX) || exit 1
    trap 'rm -rf "$ws"' EXIT
    failures=0
    expect() { # expect WHAT COMMAND...
        _what=$1
        shift
        if "$@"; then
            echo "ok     $_what"
        else
            echo "FAILED $_what (status=$status denied=$denied error=$error)"
            failures=$((failures + 1))
        fi
    }

    note=$ws/note.txt
    run_confined read-only "$ws" sh -c "echo hello > '$note'" 2>/dev/null
    if [ "$error" = SANDBOX_UNAVAILABLE ]; then
        echo "skipped: no sandbox usable here"
        exit 77
    fi
    expect "read-only: the write is denied (result.denied)" test "$denied" = true -a "$status" -ne 0
    expect "read-only: nothing was written" test ! -e "$note"

    # Acting on `denied`: this caller decides a workspace write is fine and retries once.
    if [ "$denied" = true ]; then
        run_confined workspace-write "$ws" sh -c "echo hello > '$note'"
    fi
    expect "workspace-write: the retry succeeds" test "$status" -eq 0 -a "$denied" = false
    expect "workspace-write: the file landed" test "$(cat "$note" 2>/dev/null)" = hello

    run_confined read-only "$ws" sh -c 'exit 7'
    expect "the command's own status comes through" test "$status" -eq 7 -a "$denied" = false -a -z "$error"

    run_confined read-only "$ws" no-such-command-dsh-example 2>/dev/null
    expect "a missing command is an error record, exit 127" test "$status" -eq 127 -a "$error" = COMMAND_NOT_FOUND

    run_confined read-only "$ws" sh -c 'echo permission denied >&2' 2>/dev/null
    expect "the words alone, with exit 0, are not a denial" test "$status" -eq 0 -a "$denied" = false

    [ "$failures" -eq 0 ]
}

if [ "$1" = --self-test ]; then
    self_test
    exit $?
fi
if [ $# -eq 0 ]; then
    echo "usage: run-confined.sh [--self-test | COMMAND [ARG...]]" >&2
    exit 2
fi
run_confined "${MODE:-read-only}" "$PWD" "$@"
if [ -n "$error" ]; then
    echo "dsh-confine did not run the command ($error)" >&2
elif [ "$denied" = true ]; then
    echo "the sandbox denied a write under ${MODE:-read-only} mode" >&2
fi
exit "$status"
