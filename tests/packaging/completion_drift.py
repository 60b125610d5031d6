#!/usr/bin/env python3
"""The completions cannot drift from the binary: each shell's completion is
asked for real (bash with bash-completion, zsh through zpty, fish with
`complete -C`) and its answers are compared with what --help declares.

    completion_drift.py DSH_CONFINE COMPLETIONS_DIR
"""
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from helpinfo import describe, long_options, option_description, subcommands, values_in  # noqa: E402
from tap import Tap  # noqa: E402

BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"

BASH_DRIVER = r'''
source "$1"
source "$2"
shift 2
for line in "$@"; do
    COMP_LINE="$line"; COMP_POINT=${#line}
    read -ra COMP_WORDS <<< "$line"
    [[ $line == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMPREPLY=()
    _dsh_confine dsh-confine "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
    printf '%s\n' "${COMPREPLY[@]}"
    printf '\x1e\n'
done
'''

# An interactive zsh on a pty: compinit with our directory first on fpath,
# compadd wrapped to log every match it is given, then TAB after each line.
ZSH_DRIVER = r'''
zmodload zsh/zpty
dir=$1 out=$2; shift 2
export TERM=dumb
zpty z zsh -f -i
zpty -w z "PS1='> '; bindkey -e; fpath=($dir \$fpath); autoload -Uz compinit; compinit -u -D; compadd () { local -a __h; builtin compadd -O __h \"\$@\"; print -rl -- \$__h >> \$__out; builtin compadd \"\$@\" }; echo READY"
zpty -r z x '*READY*'
integer i=0
for line in "$@"; do
    (( i++ ))
    zpty -w z "__out=$out.$i; : > \$__out; echo GO$i"
    zpty -r z x "*GO$i*"
    zpty -r z x '*> '
    zpty -w -n z "$line"$'\t'
    zpty -w -n z $'\x15'
    zpty -w z "echo DONE$i"
    zpty -r z x "*DONE$i*"
done
zpty -d z
'''


def bash_tab(compfile, typed):
    """Types `typed` and TAB into an interactive bash on a pty (readline, the real
    thing) and returns what the line shows afterwards."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"],
                   {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "dumb", "HOME": "/nonexistent",
                    "PS1": "$ "})
    buf = b""

    def read_until(marker, timeout):
        nonlocal buf
        end = time.time() + timeout
        while time.time() < end and marker not in buf:
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                try:
                    buf += os.read(fd, 4096)
                except OSError:
                    break
        return marker in buf

    try:
        os.write(fd, ("source %s; source %s; echo READ''Y\n" % (BASH_COMPLETION, compfile)).encode())
        assert read_until(b"READY\r\n", 20), buf
        buf = b""
        os.write(fd, typed.encode() + b"\t")
        read_until(b"\x00never", 1.5)  # let readline finish
        return buf.decode(errors="replace")
    finally:
        try:
            os.write(fd, b"\x15exit\n")
        except OSError:
            pass
        os.close(fd)
        os.waitpid(pid, 0)


def split_answers(text):
    groups, cur = [], []
    for line in text.split("\n"):
        if line == "\x1e":
            groups.append(cur)
            cur = []
        elif line:
            cur.append(line)
    return groups


class Shell:
    def __init__(self, name, compdir):
        self.name, self.compdir = name, compdir

    def available(self):
        if self.name == "bash":
            return shutil.which("bash") and os.path.exists(BASH_COMPLETION)
        return shutil.which(self.name)

    def complete(self, lines):
        """Each command line (cursor at its end) -> the set of candidates."""
        if self.name == "bash":
            r = subprocess.run(["bash", "-c", BASH_DRIVER, "drift", BASH_COMPLETION,
                                os.path.join(self.compdir, "bash", "dsh-confine")] + lines,
                               capture_output=True, text=True, timeout=60)
            groups = split_answers(r.stdout)
        elif self.name == "zsh":
            with tempfile.TemporaryDirectory(prefix="dsh-zsh-", dir="/var/tmp") as d:
                out = os.path.join(d, "out")
                subprocess.run(["zsh", "-f", "-c", ZSH_DRIVER, "drift", os.path.join(self.compdir, "zsh"), out]
                               + lines, capture_output=True, text=True, timeout=120)
                groups = []
                # Under load the first TAB can reach zle before it is ready: ask
                # again, up to three times, for any line that got no answer at all
                # (seen once in CI with a single retry, while a build was killed).
                def answered(i):
                    return os.path.exists("%s.%d" % (out, i)) and os.path.getsize("%s.%d" % (out, i)) > 0
                for i in range(1, len(lines) + 1):
                    for attempt in range(3):
                        if answered(i):
                            break
                        time.sleep(0.2 * attempt)
                        retry = "%s.retry%d.%d" % (out, i, attempt)
                        subprocess.run(["zsh", "-f", "-c", ZSH_DRIVER, "drift", os.path.join(self.compdir, "zsh"),
                                        retry, lines[i - 1]], capture_output=True, timeout=60)
                        if os.path.exists(retry + ".1"):
                            os.replace(retry + ".1", "%s.%d" % (out, i))
                for i in range(1, len(lines) + 1):
                    try:
                        groups.append([w for w in open("%s.%d" % (out, i)).read().split("\n") if w])
                    except FileNotFoundError:
                        groups.append([])
        else:
            script = "source %s\n" % os.path.join(self.compdir, "fish", "dsh-confine.fish")
            for line in lines:
                script += "complete -C %s\necho \\x1e\n" % shell_quote(line)
            r = subprocess.run(["fish", "--no-config", "-c", script], capture_output=True, text=True, timeout=60)
            groups = [[w.split("\t")[0] for w in g] for g in split_answers(r.stdout)]
        assert len(groups) == len(lines), "%s answered %d of %d queries" % (self.name, len(groups), len(lines))
        return dict(zip(lines, (set(g) for g in groups)))


def shell_quote(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def longs(cands):
    return {c for c in cands if c.startswith("--") and c != "--"}


def main():
    binary, compdir = sys.argv[1], sys.argv[2]
    helps = describe(binary)
    top = long_options(helps[""])
    subs = subcommands(helps[""])
    modes = values_in(option_description(helps[""], "--mode"))
    runners = values_in(option_description(helps[""], "--runner"))
    assert "workspace-write" in modes and "landlock" in runners, (modes, runners)
    fallthrough = [s for s in sorted(subs) if not subcommands(helps[s])]  # probe, explain, check, self-test

    queries = ["dsh-confine --", "dsh-confine ", "dsh-confine --mode ", "dsh-confine --runner ",
               "dsh-confine session ", "dsh-confine session set-mode log.jsonl ",
               "dsh-confine --mode read-only -- ech", "dsh-confine -- dsh-confine --mo",
               "dsh-confine --setenv HOM"]
    queries += ["dsh-confine %s --" % s for s in fallthrough]

    t = Tap()
    for name in ("bash", "zsh", "fish"):
        shell = Shell(name, compdir)
        answers = {}

        def ask():
            if not shell.available():
                t.skip("%s is not installed" % name + (" (with bash-completion)" if name == "bash" else ""))
            answers.update(shell.complete(queries))
        t.case("%s: completion answers" % name, ask)
        if not answers:
            continue

        def top_options():
            got = longs(answers["dsh-confine --"])
            assert got == top, "only in --help: %s; only in the completion: %s" % (
                sorted(top - got), sorted(got - top))
        t.case("%s: top-level options match --help exactly" % name, top_options)

        def sub_options():
            problems = []
            for s in fallthrough:
                got = longs(answers["dsh-confine %s --" % s])
                own = long_options(helps[s])
                if own - got:
                    problems.append("%s: missing %s" % (s, sorted(own - got)))
                if got - own - top:
                    problems.append("%s: unknown %s" % (s, sorted(got - own - top)))
            assert not problems, problems
        t.case("%s: each subcommand's options match its --help" % name, sub_options)

        def subcommand_names():
            got = {c for c in answers["dsh-confine "] if not c.startswith("-")}
            assert got == subs, "only in --help: %s; only in the completion: %s" % (sorted(subs - got),
                                                                                   sorted(got - subs))
            assert "--" in answers["dsh-confine "], "'--' is not offered before the command"
            sess = {c for c in answers["dsh-confine session "] if not c.startswith("-")}
            assert sess == subcommands(helps["session"]), sess
        t.case("%s: subcommands match --help" % name, subcommand_names)

        def values():
            assert answers["dsh-confine --mode "] == modes, answers["dsh-confine --mode "]
            assert answers["dsh-confine --runner "] == runners, answers["dsh-confine --runner "]
            assert answers["dsh-confine session set-mode log.jsonl "] == modes
            assert "HOME" in answers["dsh-confine --setenv HOM"]
        t.case("%s: mode and runner values match --help" % name, values)

        def after_dashdash():
            assert "echo" in answers["dsh-confine --mode read-only -- ech"], answers
            # The command's own completion takes over after "--" (here: ours again).
            assert "--mode" in answers["dsh-confine -- dsh-confine --mo"], answers
        t.case("%s: the command after -- is completed as a command" % name, after_dashdash)

        if name == "bash":
            def interactive():
                f = os.path.join(compdir, "bash", "dsh-confine")
                line = bash_tab(f, "dsh-confine --mode work")
                assert line.endswith("dsh-confine --mode workspace-write "), repr(line)
                line = bash_tab(f, "dsh-confine --runner landlock -- dsh-confine --scrub")
                assert line.endswith("-- dsh-confine --scrub-secrets "), repr(line)
            t.case("bash: TAB on a terminal completes (readline, interactive)", interactive)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
