#!/usr/bin/env python3
"""The bwrap stage starts before the C++ static initialisers, and may: the
binary's .preinit_array holds the stage's early entry, the binary can unwind
an exception there (PT_GNU_EH_FRAME: crtbegin has not registered .eh_frame
yet), and no code of ours has a dynamic initialiser the stage could find
unrun, except cli.cpp's (the launcher's command line, which the stage never
reaches). See src/linux/bwrap_stage.cpp early_entry and docs/DECISIONS.md.

    stage_entry.py DSH_CONFINE SRC_DIR

Prints TAP.
"""
import os
import re
import shutil
import struct
import subprocess
import sys

from tap import Tap

PT_GNU_EH_FRAME = 0x6474E550
# The launcher's command line: CLI11's objects and, through <iostream>,
# libstdc++'s streams and locale. The stage never calls into it.
ALLOWED_INITIALISERS = {"cli.cpp"}


class Elf:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = f.read()
        d = self.data
        assert d[:4] == b"\x7fELF" and d[4] == 2, "not a 64-bit ELF"
        self.end = "<" if d[5] == 1 else ">"
        (self.phoff, self.shoff) = struct.unpack_from(self.end + "QQ", d, 32)
        (self.phentsize, self.phnum, self.shentsize, self.shnum, self.shstrndx) = struct.unpack_from(
            self.end + "HHHHH", d, 54)

    def program_header_types(self):
        return [struct.unpack_from(self.end + "I", self.data, self.phoff + i * self.phentsize)[0]
                for i in range(self.phnum)]

    def sections(self):
        """name -> (addr, offset, size)"""
        raw = []
        for i in range(self.shnum):
            name, _type, _flags, addr, off, size = struct.unpack_from(
                self.end + "IIQQQQ", self.data, self.shoff + i * self.shentsize)
            raw.append((name, addr, off, size))
        strtab_off = raw[self.shstrndx][2]
        out = {}
        for name, addr, off, size in raw:
            end = self.data.index(b"\0", strtab_off + name)
            out[self.data[strtab_off + name:end].decode()] = (addr, off, size)
        return out


def symbols(t, binary):
    if not shutil.which("nm"):
        t.skip("nm is not installed")
    r = subprocess.run(["nm", binary], capture_output=True, text=True)
    if "no symbols" in r.stderr:
        t.skip("the binary is stripped")
    assert r.returncode == 0, r.stderr
    out = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            out.append((int(parts[0], 16), parts[1], parts[2]))
    return out


def main():
    binary, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    elf = Elf(binary)
    t = Tap()

    def preinit_holds_the_stage():
        secs = elf.sections()
        assert ".preinit_array" in secs, "no .preinit_array: the stage would start after every static initialiser"
        _addr, off, size = secs[".preinit_array"]
        entries = [struct.unpack_from(elf.end + "Q", elf.data, off + 8 * i)[0] for i in range(size // 8)]
        early = [a for a, _k, name in symbols(t, binary) if "early_entry" in name and "hook" not in name]
        assert early, "no early_entry symbol"
        assert set(early) & set(entries), "the .preinit_array %s does not hold early_entry %s" % (
            [hex(e) for e in entries], [hex(e) for e in early])
    t.case("the stage's early entry is in .preinit_array", preinit_holds_the_stage)

    def unwinds_before_init():
        assert PT_GNU_EH_FRAME in elf.program_header_types(), (
            "no PT_GNU_EH_FRAME: an exception in the stage could not unwind before frame_dummy "
            "(link the static binary with -Wl,--eh-frame-hdr)")
    t.case("exceptions unwind before the static initialisers (PT_GNU_EH_FRAME)", unwinds_before_init)

    def no_dynamic_initialisers():
        ours = set()
        for root, _dirs, files in os.walk(src):
            ours.update(f for f in files if f.endswith((".cpp", ".cc", ".c")))
        found = set()
        for _a, _k, name in symbols(t, binary):
            m = re.match(r"_GLOBAL__sub_I_(.+)$", name)
            # A priority prefix (_GLOBAL__sub_I_00099_0_x.cpp) is a sanitizer's
            # module constructor, not a C++ dynamic initialiser.
            if not m or re.match(r"\d{5}_", m.group(1)):
                continue
            found.add(re.sub(r"(\.(cold|part|isra|constprop)(\.\d+)?)+$", "", m.group(1)))
        t.diag("dynamic initialisers: %s" % ", ".join(sorted(found)))
        bad = sorted(f for f in found & ours if f not in ALLOWED_INITIALISERS)
        assert not bad, ("dynamic initialisers in %s: the bwrap stage runs before them (src/linux/"
                         "bwrap_stage.cpp early_entry); make them constant-initialised or function-local"
                         % bad)
    t.case("no dynamic initialiser of ours outside the launcher's command line", no_dynamic_initialisers)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
