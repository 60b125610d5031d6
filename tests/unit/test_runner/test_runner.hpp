// A runner that exists only in the unit tests: it plugs into the chain and
// into supervise through runner.hpp alone (no edit anywhere else), which is
// the proof that a new runner is its folder plus one registry line.
#pragma once

#include "runner.hpp"

namespace dsh::testrunner {

// What the fake does, set by each test.
struct Script {
    bool candidate = true;         // candidate(): false = auto never asks
    Verdict::Kind probe = Verdict::Usable;
    std::string unusable_reason = "not here";
    bool plan_fails = false;       // plan(): "cannot be used" (passed over)
    bool plan_ends_run = false;    // plan(): a failure that ends the run (the mode's text)
    bool apply_fails = false;      // the in-process layer fails in the child
    int apply_marker_fd = -1;      // the layer writes one byte here when it applies
    bool private_tmp = false;      // it can give a private /tmp
    bool egress_proxy = false;     // it can take --net allow=
    bool protects_paths = false;   // it keeps protected paths read-only and hides hidden ones
    std::string ends_descendants;  // its own way of ending them ("" none)
    int probes = 0;                // how often probe() was asked
};

// A runner of `kind` (the report needs a name from its vocabulary) that
// execs /bin/sh -c SCRIPT with an in-process layer of its own.
std::unique_ptr<Runner> make(RunnerKind kind, Script& script, std::string sh_script);

}  // namespace dsh::testrunner
