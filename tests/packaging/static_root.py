#!/usr/bin/env python3
"""The static binary needs no shared library: it is an ELF without an interpreter
or a dynamic section, and it confines a (static) command inside a chroot that
holds nothing but the two binaries and two directories.

    static_root.py DSH_CONFINE_STATIC STATIC_PROBE

Needs root for chroot: skipped otherwise (a failure under DSH_CONFINE_MUST_WORK=1).
Prints TAP.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

from tap import Tap

PT_INTERP, PT_DYNAMIC = 3, 2
# glibc's NSS functions dlopen() shared libraries at run time even from a
# static binary: a static dsh-confine must not call them (see docs/DECISIONS.md).
NSS_SYMBOLS = ("getpwnam", "getpwuid", "getpwnam_r", "getpwuid_r", "getgrnam", "getgrgid", "getaddrinfo",
               "gethostbyname", "getservbyname")


def program_headers(path):
    with open(path, "rb") as f:
        ident = f.read(16)
        assert ident[:4] == b"\x7fELF", "not an ELF file"
        assert ident[4] == 2, "not a 64-bit ELF"
        end = "<" if ident[5] == 1 else ">"
        hdr = f.read(48)
        e_phoff = struct.unpack(end + "Q", hdr[16:24])[0]
        e_phentsize, e_phnum = struct.unpack(end + "HH", hdr[38:42])
        types = []
        for i in range(e_phnum):
            f.seek(e_phoff + i * e_phentsize)
            types.append(struct.unpack(end + "I", f.read(4))[0])
        return types


def main():
    binary, probe = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    t = Tap()

    def is_static():
        types = program_headers(binary)
        assert PT_INTERP not in types, "has an ELF interpreter: dynamically linked"
        assert PT_DYNAMIC not in types, "has a dynamic section"
        if shutil.which("ldd"):
            r = subprocess.run(["ldd", binary], capture_output=True, text=True)
            assert r.returncode != 0 and "not a dynamic executable" in (r.stdout + r.stderr), r
        size = os.path.getsize(binary)
        t.diag("static binary: %d bytes (%.2f MB)" % (size, size / 1e6))
        # The budget (issue 8: at most 3 MB) is for the binary as shipped,
        # i.e. installed with `meson install --strip`.
        shipped = size
        if shutil.which("strip"):
            with tempfile.TemporaryDirectory(prefix="dsh-strip-", dir="/var/tmp") as d:
                out = os.path.join(d, "dsh-confine")
                subprocess.run(["strip", "-o", out, binary], check=True)
                shipped = os.path.getsize(out)
            t.diag("stripped: %d bytes (%.2f MB)" % (shipped, shipped / 1e6))
        assert shipped <= 3000000, "larger than 3 MB as shipped: %d bytes" % shipped
        sizes["shipped"] = shipped
    sizes = {}
    t.case("the binary is fully static and at most 3 MB stripped", is_static)

    def readme_says_the_size():
        # The README's figures (the Install section and the targets table) are this binary's, to 0.1 MB.
        readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")
        if "shipped" not in sizes or not os.path.exists(readme) or not shutil.which("strip"):
            t.skip("no stripped size or no README to compare")
        text = open(readme, encoding="utf-8").read()
        said = [float(x) for x in re.findall(r"fully static by default \((\d+\.\d+) MB", text) +
                re.findall(r"\| static binary, stripped[^|]*\| (\d+\.\d+) MB", text)]
        assert len(said) == 2, "the README's two size figures were not found: %r" % said
        actual = sizes["shipped"] / 1e6
        for mb in said:
            assert abs(mb - actual) <= 0.1, "the README says %.2f MB; stripped it is %.2f MB" % (mb, actual)
    t.case("the README's size figures are the stripped binary's", readme_says_the_size)

    def no_nss():
        if not shutil.which("nm"):
            t.skip("nm is not installed")
        r = subprocess.run(["nm", binary], capture_output=True, text=True)
        assert r.returncode == 0 or "no symbols" in r.stderr, r.stderr
        if "no symbols" in r.stderr:
            t.skip("the binary is stripped")
        defined = {line.split()[-1] for line in r.stdout.splitlines() if line.strip()}
        bad = sorted(s for s in NSS_SYMBOLS if s in defined)
        assert not bad, "static binary links glibc NSS/dlopen functions (need shared libs at run time): %s" % bad
    t.case("no glibc NSS function is linked in", no_nss)

    root_ok = os.getuid() == 0

    def run_in_root(mode, userspec=None, proc=True):
        if not root_ok:
            t.skip("chroot needs root")
        base = tempfile.mkdtemp(prefix="dsh-static-root-", dir="/var/tmp")
        mounted = False
        try:
            os.chmod(base, 0o755)
            shutil.copy2(binary, os.path.join(base, "dsh-confine"))
            shutil.copy2(probe, os.path.join(base, "probe"))
            for d in ("ws", "outside"):
                os.mkdir(os.path.join(base, d))
                os.chmod(os.path.join(base, d), 0o777)
            # Nothing else: no /lib, /usr, /etc, /dev or /tmp; /proc (mounted) where asked:
            # the Landlock runner checks through it that the restriction took (issue 38).
            assert sorted(os.listdir(base)) == ["dsh-confine", "outside", "probe", "ws"]
            if proc:
                os.mkdir(os.path.join(base, "proc"))
                subprocess.run(["mount", "-t", "proc", "proc", os.path.join(base, "proc")], check=True)
                mounted = True
            r_fd, w_fd = os.pipe()
            chroot = shutil.which("chroot") or "/usr/sbin/chroot"
            cmd = [chroot] + (["--userspec=" + userspec] if userspec else []) + [
                base, "/dsh-confine", "--report-fd", str(w_fd), "--mode", mode, "--root", "/ws", "--",
                "/probe", "/ws/inside", "/outside/escape"]
            p = subprocess.Popen(cmd, pass_fds=[w_fd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env={"PATH": "/"})
            os.close(w_fd)
            report = os.read(r_fd, 1 << 20).decode()
            out, err = p.communicate(timeout=60)
            os.close(r_fd)
            records = [json.loads(line) for line in report.splitlines()]
            info = "rc=%s out=%r err=%r report=%s" % (p.returncode, out, err, report)
            if not proc:
                # Without /proc the check cannot be made: refused, nothing run (fail closed).
                assert p.returncode == 125 and b"cannot check that Landlock took" in err, info
                assert not os.path.exists(os.path.join(base, "ws", "inside")), info
                return
            conf = [r for r in records if r["type"] == "confinement"]
            assert conf, info
            assert conf[0]["runner"] == "landlock" and conf[0]["enforcement"] in ("full", "partial"), info
            # Verified from outside the root.
            assert os.path.exists(os.path.join(base, "ws", "inside")), info
            assert not os.path.exists(os.path.join(base, "outside", "escape")), info
            assert p.returncode == 1, info  # exactly one denied write
            t.diag("in the minimal root: " + out.decode().strip().replace("\n", "; "))
        finally:
            if mounted:
                subprocess.run(["umount", "-l", os.path.join(base, "proc")])
            shutil.rmtree(base, ignore_errors=True)

    t.case("confines a command in a root with no shared libraries (root)",
           lambda: run_in_root("workspace-write"))
    t.case("confines a command in a root with no shared libraries (uid 65534)",
           lambda: run_in_root("workspace-write", "65534:65534"))
    t.case("refuses in a root without /proc, where it cannot check that Landlock took",
           lambda: run_in_root("workspace-write", proc=False))
    sys.exit(t.done())


if __name__ == "__main__":
    main()
