# fish completion for dsh-confine. tests/packaging/completion_drift.py checks
# these options against `dsh-confine --help` (and each subcommand's --help),
# so keep them in step.

set -l modes read-only workspace-write danger-full-access
set -l runners auto bwrap landlock seatbelt windows-acl custom
set -l subcommands probe explain check session self-test

# Prints the index (in `commandline -opc`) where the command starts, once it
# has: after "--" (before any subcommand, or after explain), or the first word
# that is not ours (our options end there).
function __dsh_confine_command_index
    set -l tokens (commandline -opc)
    set -l skip 0
    set -l sub ''
    for i in (seq 2 (count $tokens))
        if test $skip -gt 0
            set skip (math $skip - 1)
            continue
        end
        set -l t $tokens[$i]
        switch $t
            case --
                if test -z "$sub"; or test "$sub" = explain
                    math $i + 1
                    return 0
                end
                return 1
            case --mode --root --runner --writable --cache --protect --unprotect --deny-read --config --session --probe-timeout --report-fd --report-file --keep-fd --escalate --justification --approver --setenv --unsetenv --platform --write --read --binary --net --net-deny --escalate-net
                set skip 1
            case '-*'
            case '*'
                if test -z "$sub"; and contains -- $t probe explain check session self-test
                    set sub $t
                else if test -z "$sub"; or test "$sub" = explain
                    echo $i
                    return 0
                end
        end
    end
    return 1
end

function __dsh_confine_after_dashdash
    __dsh_confine_command_index >/dev/null
end

# Completes the command as its own command line.
function __dsh_confine_complete_command
    set -l tokens (commandline -opc)
    set -l i (__dsh_confine_command_index)
    set -l rest $tokens[$i..-1] (commandline -ct)
    complete -C (string join ' ' -- (string escape -- $rest[1..-2]) $rest[-1])
end

# The subcommand, if the first word that is not ours is one.
function __dsh_confine_sub
    set -l tokens (commandline -opc)[2..-1]
    set -l skip 0
    for t in $tokens
        if test $skip -gt 0
            set skip (math $skip - 1)
            continue
        end
        switch $t
            case --
                return 1
            case --mode --root --runner --writable --cache --protect --unprotect --deny-read --config --session --probe-timeout --report-fd --report-file --keep-fd --escalate --justification --approver --setenv --unsetenv --platform --write --read --binary --net --net-deny --escalate-net
                set skip 1
            case '-*'
            case '*'
                if contains -- $t probe explain check session self-test
                    echo $t
                    return 0
                end
                return 1
        end
    end
    return 1
end

function __dsh_confine_top
    not __dsh_confine_after_dashdash; and not __dsh_confine_sub >/dev/null
end

function __dsh_confine_in
    not __dsh_confine_after_dashdash; and contains -- (__dsh_confine_sub) $argv
end

complete -c dsh-confine -n __dsh_confine_after_dashdash -f -a '(__dsh_confine_complete_command)'

# Top-level options; explain and check take them too.
set -l policy_cond 'not __dsh_confine_after_dashdash; and begin; __dsh_confine_top; or __dsh_confine_in explain check; end'
complete -c dsh-confine -n $policy_cond -s h -l help -d 'print help and exit'
complete -c dsh-confine -n $policy_cond -s V -l version -d 'print the version and exit'
complete -c dsh-confine -n $policy_cond -l mode -x -a "$modes" -d 'file-write policy'
complete -c dsh-confine -n $policy_cond -l root -x -a '(__fish_complete_directories)' -d 'workspace root'
complete -c dsh-confine -n $policy_cond -l runner -x -a "$runners" -d 'confinement mechanism'
complete -c dsh-confine -n $policy_cond -l net -x -a 'off loopback host allow=' -d 'network: host (default), loopback, off or allow=LIST'
complete -c dsh-confine -n $policy_cond -l net-deny -x -d 'refuse these destinations even where allow= lists them'
complete -c dsh-confine -n $policy_cond -l writable -r -F -d 'another writable path'
complete -c dsh-confine -n $policy_cond -l cache -x -a 'npm pip cargo go yarn maven ccache' -d "make these tools' caches writable"
complete -c dsh-confine -n $policy_cond -l agent -d 'for an AI agent: workspace-write, network off, secrets hidden and scrubbed'
complete -c dsh-confine -n $policy_cond -l protect -r -F -d 'keep this path read-only inside the writable roots'
complete -c dsh-confine -n $policy_cond -l unprotect -r -F -d 'drop this path from the default protected set'
complete -c dsh-confine -n $policy_cond -l deny-read -r -F -d 'hide this path from the command'
complete -c dsh-confine -n $policy_cond -l hide-secrets -d 'hide ssh private keys, credentials and the ssh agent socket'
complete -c dsh-confine -n $policy_cond -l private-tmp -d 'give the command an empty /tmp of its own, discarded at exit'
complete -c dsh-confine -n $policy_cond -l allow-userns -d 'let the command make user namespaces'
complete -c dsh-confine -n $policy_cond -l keep-descendants -d "leave the command's background processes running when it exits"
complete -c dsh-confine -n $policy_cond -l config -r -F -d 'config file (JSON)'
complete -c dsh-confine -n $policy_cond -l session -r -F -d 'session log that sets the mode'
complete -c dsh-confine -n $policy_cond -l probe-timeout -x -d 'bound on each runner probe (ms)'
complete -c dsh-confine -n $policy_cond -l report-fd -x -d 'write the JSON-lines report to this fd'
complete -c dsh-confine -n $policy_cond -l report-file -r -F -d 'write the JSON-lines report to this new file (created, never overwritten)'
complete -c dsh-confine -n $policy_cond -l keep-fd -x -d 'pass this fd through to the command'
complete -c dsh-confine -n $policy_cond -l timeout -x -d 'kill the command and everything it started after DURATION'
complete -c dsh-confine -n $policy_cond -l kill-after -x -d 'SIGKILL this long after the timeout sends SIGTERM'
complete -c dsh-confine -n $policy_cond -l max-procs -x -d 'limit the number of processes'
complete -c dsh-confine -n $policy_cond -l memory -x -d 'limit memory (512M, 2G)'
complete -c dsh-confine -n $policy_cond -l cpu-time -x -d 'limit CPU time (per process)'
complete -c dsh-confine -n $policy_cond -l file-size -x -d 'limit the size of each file the command writes'
complete -c dsh-confine -n $policy_cond -l nofile -x -d 'limit open files per process'
complete -c dsh-confine -n $policy_cond -l limits -x -a 'best-effort required' -d 'refuse to run when a limit cannot be enforced as asked'
complete -c dsh-confine -n $policy_cond -l allow-core -d 'let the command dump core'
complete -c dsh-confine -n $policy_cond -l supervise -d 'stay as the parent and report the outcome'
complete -c dsh-confine -n $policy_cond -l no-pty -d 'give the command this terminal, not a pty of its own (gives up the terminal protections)'
complete -c dsh-confine -n $policy_cond -l markers -d 'append the sandbox marker lines to stderr'
complete -c dsh-confine -n $policy_cond -l dry-run -d 'print the plan and run nothing'
complete -c dsh-confine -n $policy_cond -l escalate -x -a 'workspace-write danger-full-access' -d 'ask for a wider mode for this call'
complete -c dsh-confine -n $policy_cond -l escalate-net -x -a 'loopback host' -d 'ask for a wider network for this call'
complete -c dsh-confine -n $policy_cond -l justification -x -d 'why the escalation is needed'
complete -c dsh-confine -n $policy_cond -l approver -x -a 'tty (__fish_complete_command)' -d 'who approves an escalation'
complete -c dsh-confine -n $policy_cond -l clearenv -d 'start the command with an empty environment'
complete -c dsh-confine -n $policy_cond -l setenv -x -a '(set -xn)' -d 'set an environment variable: NAME=VALUE'
complete -c dsh-confine -n $policy_cond -l unsetenv -x -a '(set -xn)' -d 'remove an environment variable'
complete -c dsh-confine -n $policy_cond -l scrub-secrets -d 'drop variables whose names look like credentials'

# Subcommands, and "--" before the command.
complete -c dsh-confine -n __dsh_confine_top -f -a probe -d 'which runners work here, and why not'
complete -c dsh-confine -n __dsh_confine_top -f -a explain -d 'print the plan for a command and run nothing'
complete -c dsh-confine -n __dsh_confine_top -f -a check -d 'would the policy let a write to (or a read of) PATH happen?'
complete -c dsh-confine -n __dsh_confine_top -f -a session -d 'the session mode log'
complete -c dsh-confine -n __dsh_confine_top -f -a self-test -d 'run the conformance checks under each usable runner'
complete -c dsh-confine -n __dsh_confine_top -f -a -- -d 'the command follows'
complete -c dsh-confine -n '__dsh_confine_in explain' -f -a -- -d 'the command follows'

complete -c dsh-confine -n '__dsh_confine_in probe self-test' -s h -l help -d 'print help and exit'
complete -c dsh-confine -n '__dsh_confine_in probe explain check self-test' -l json -d 'print JSON'
complete -c dsh-confine -n '__dsh_confine_in probe self-test' -l runner -x -a "$runners" -d 'check only this runner'
complete -c dsh-confine -n '__dsh_confine_in probe self-test' -l config -r -F -d 'config file (JSON)'
complete -c dsh-confine -n '__dsh_confine_in probe' -l probe-timeout -x -d 'bound on each runner probe (ms)'
complete -c dsh-confine -n '__dsh_confine_in self-test' -l binary -r -F -d 'test this dsh-confine-compatible program instead'
complete -c dsh-confine -n '__dsh_confine_in explain' -l context -d 'print the one-line policy text for a model'
complete -c dsh-confine -n '__dsh_confine_in explain' -l platform -x -a 'linux darwin windows' -d 'render the plan for this system'
complete -c dsh-confine -n '__dsh_confine_in check' -l write -r -F -d 'would a write to this path happen'
complete -c dsh-confine -n '__dsh_confine_in check' -l read -r -F -d 'would a read of this path happen'

# session set-mode FILE MODE
complete -c dsh-confine -n '__dsh_confine_in session; and test (count (commandline -opc)) -eq 2' -f -a set-mode -d 'append a sandbox/mode event'
complete -c dsh-confine -n '__dsh_confine_in session; and test (count (commandline -opc)) -eq 2' -f -a show -d 'print what the session log sets'
complete -c dsh-confine -n '__dsh_confine_in session; and test (count (commandline -opc)) -eq 2' -s h -l help -d 'print help and exit'
complete -c dsh-confine -n '__dsh_confine_in session; and test (count (commandline -opc)) -eq 3' -F
complete -c dsh-confine -n '__dsh_confine_in session; and test (count (commandline -opc)) -eq 4' -f -a "$modes"
complete -c dsh-confine -n '__dsh_confine_in session; and test (count (commandline -opc)) -ge 5' -f
