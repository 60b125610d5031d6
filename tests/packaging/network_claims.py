#!/usr/bin/env python3
"""What the documents and the record say about the network is true to the --net axis (issue 42):
nothing says the network is not governed at all, or that the policy covers file effects only; where
the network is ungoverned they say it is --net host's (the default) doing.

    network_claims.py SOURCE_ROOT DSH_CONFINE
"""
import json
import os
import subprocess
import sys
import tempfile

from tap import Tap

# Claims from before --net: each one false since off, loopback and allow= govern the network.
STALE = ("covers file effects only", "Today's behaviour: not governed", "not governed yet",
         "network axis is planned", "file effects only: network access is not governed")


def main():
    root, dsh = sys.argv[1], sys.argv[2]
    t = Tap()

    def documents():
        for rel in ("man/dsh-confine.1.scd", "docs/SECURITY.md", "README.md"):
            text = " ".join(open(os.path.join(root, rel), encoding="utf-8").read().split())
            found = [c for c in STALE if c in text]
            assert not found, "%s still says %r" % (rel, found)
    t.case("the man page, SECURITY.md and README do not say the network is ungoverned", documents)

    def record():
        ws = tempfile.mkdtemp(prefix="dsh-net-claims-", dir="/var/tmp")
        planned = 0
        for runner in ("bwrap", "landlock"):
            r = subprocess.run([dsh, "explain", "--json", "--runner", runner, "--mode", "workspace-write", "--root",
                                ws, "--", "true"], capture_output=True, text=True, timeout=60, cwd=ws)
            if r.returncode != 0:
                continue  # a runner this host cannot plan: nothing to read
            planned += 1
            c = json.loads(r.stdout)["confinement"]
            gaps = c["gaps"] + [g for layer in c["layers"] for g in layer["gaps"]] + c["network"]["gaps"]
            for g in gaps:
                if g["effect"] == "network":
                    assert "--net host" in g["detail"], (runner, g)
                assert not any(s in g["detail"] for s in STALE), (runner, g)
        os.rmdir(ws)
        if not planned:
            t.skip("no runner can be planned here")
    t.case("the record's network gaps name --net host as their cause", record)

    t.done()


if __name__ == "__main__":
    main()
