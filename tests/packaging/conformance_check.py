#!/usr/bin/env python3
"""Every test the conformance table (tests/conformance/README.md) names still exists.

    conformance_check.py SOURCE_ROOT

e2e references are `FILE.py::test_name` (a `def test_name` in tests/e2e/FILE.py); unit
references are `unit: "NAME"` (a `TEST_CASE("NAME"` in tests/unit/*.cpp). TAP output.
"""
import glob
import os
import re
import sys

from tap import Tap


def main():
    root = sys.argv[1]
    table = open(os.path.join(root, "tests", "conformance", "README.md"), encoding="utf-8").read()
    rows = [l for l in table.splitlines() if re.match(r"^\| *\d+ *\|", l)]
    unit_src = "".join(open(p, encoding="utf-8").read() for p in glob.glob(os.path.join(root, "tests", "unit", "*.cpp")))
    t = Tap()

    def check_rows():
        assert len(rows) >= 30, "the table has %d rows" % len(rows)
        for row in rows:
            cell = row.rstrip("|").split("|")[-1]
            refs = re.findall(r"([a-z_]+\.py)::(test_[a-z0-9_]+)", cell) + \
                [("unit", n) for n in re.findall(r'unit: "([^"]+)"', cell)]
            assert refs, "row names no test: %s" % row
            for where, name in refs:
                if where == "unit":
                    assert 'TEST_CASE("%s"' % name in unit_src, "unit test case %r is gone" % name
                else:
                    path = os.path.join(root, "tests", "e2e", where)
                    assert os.path.exists(path), "%s is gone" % where
                    src = open(path, encoding="utf-8").read()
                    assert re.search(r"^def %s\(" % re.escape(name), src, re.M), "%s::%s is gone" % (where, name)

    t.case("every test the conformance table names exists", check_rows)
    t.done()


if __name__ == "__main__":
    main()
