"""What `dsh-confine --help` (and each subcommand's --help) declares: the
single source the completions and the man page are checked against."""
import re
import subprocess


def run_help(binary, *sub):
    r = subprocess.run([binary] + list(sub) + ["--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, "%s %s --help: rc=%d %s" % (binary, " ".join(sub), r.returncode, r.stderr)
    return r.stdout


def sections(text):
    """{'Options': [(first column, description)], 'Subcommands': [...], ...} from the help text (src/cli.cpp)."""
    out, cur, last = {}, None, None
    for line in text.splitlines():
        m = re.match(r"^([A-Z][A-Za-z ]*):\s*$", line)
        if m:
            cur = m.group(1)
            out[cur] = []
            continue
        if cur is None or not line.strip():
            continue
        m = re.match(r"^  (\S+(?: \S+)*?)(?:\s{2,}(.*))?$", line)
        if m and not line.startswith("   "):
            out[cur].append([m.group(1), m.group(2) or ""])
        elif out[cur]:  # a description continued on the next line
            out[cur][-1][1] = (out[cur][-1][1] + " " + line.strip()).strip()
    return out


def long_options(text):
    opts = set()
    for first, _ in sections(text).get("Options", []):
        for name in first.split()[0].split(","):
            if name.startswith("--"):
                opts.add(name)
    return opts


def option_description(text, name):
    for first, desc in sections(text).get("Options", []):
        if name in first.split()[0].split(","):
            return desc
    return None


def subcommands(text):
    return {first.split()[0] for first, _ in sections(text).get("Subcommands", [])}


def values_in(description):
    """'read-only (default), workspace-write or danger-full-access' -> the value words."""
    words = re.findall(r"[a-z][a-z0-9-]*", description.split(":")[-1] if ":" in description else description)
    return {w for w in words if w not in ("default", "or", "and")}


def describe(binary):
    """{'': top-level help, 'probe': ..., 'session': ..., 'session set-mode': ...}."""
    helps = {"": run_help(binary)}
    for sub in sorted(subcommands(helps[""])):
        helps[sub] = run_help(binary, sub)
        for subsub in sorted(subcommands(helps[sub])):
            helps[sub + " " + subsub] = run_help(binary, sub, subsub)
    return helps
