#!/usr/bin/env python3
"""sanitizer_check.py CANARY: each deliberate bug in CANARY must be caught (TAP).

Registered only in a build with -Db_sanitize=address,undefined: it shows that the
sanitizer stage of tests/run really stops on a bug instead of running on."""
import subprocess
import sys

CASES = [("heap", "AddressSanitizer: heap-buffer-overflow"),
         ("use-after-free", "AddressSanitizer: heap-use-after-free"),
         ("ub", "runtime error: signed integer overflow")]

print("1..%d" % len(CASES))
failed = 0
for i, (arg, needle) in enumerate(CASES, 1):
    p = subprocess.run([sys.argv[1], arg], capture_output=True, text=True, timeout=60)
    if p.returncode != 0 and needle in p.stderr:
        print("ok %d - the sanitizer build catches %s" % (i, arg))
    else:
        failed += 1
        print("not ok %d - %s was not caught (exit %d)" % (i, arg, p.returncode))
        for line in (p.stdout + p.stderr).splitlines()[-20:]:
            print("# " + line)
sys.exit(1 if failed else 0)
