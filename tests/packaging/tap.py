"""A tiny TAP writer for the packaging tests (meson protocol: 'tap')."""
import os
import sys
import traceback

MUST_WORK = os.environ.get("DSH_CONFINE_MUST_WORK") == "1"


class _Skip(Exception):
    pass


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0
        self.lines = []

    def skip(self, reason):
        if MUST_WORK:
            raise AssertionError("required but unavailable (DSH_CONFINE_MUST_WORK=1): " + reason)
        raise _Skip(reason)

    def diag(self, text):
        self.lines.append("# " + text)

    def case(self, name, fn):
        self.n += 1
        self.lines = []
        try:
            fn()
            status = "ok %d - %s" % (self.n, name)
        except _Skip as e:
            status = "ok %d - %s # SKIP %s" % (self.n, name, e)
        except BaseException:
            self.failed += 1
            status = "not ok %d - %s" % (self.n, name)
            self.lines += ["# " + line for line in traceback.format_exc().splitlines()]
        print(status, flush=True)
        for line in self.lines:
            print(line, flush=True)

    def done(self):
        print("1..%d" % self.n, flush=True)
        return 1 if self.failed else 0
