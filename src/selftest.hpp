// `dsh-confine self-test`: a conformance check a user runs on a new machine
// before trusting it. It runs a dsh-confine binary (this one, or --binary) on
// small escape attempts and must-work actions under each usable runner, in a
// scratch directory it creates, and checks the world from outside: a check
// holds only when the file system says so, never because the report claims it.
#pragma once

#include <optional>
#include <string>

namespace dsh {

struct Request;

namespace selftest {

// Runs the checks; prints a table (or JSON with req.json). Returns 0 when
// every check held under every runner tried (at least one), 1 when any did
// not, 125 when the self-test itself could not run (no scratch directory).
int run(const Request& req);

// The confined payload for checks a shell cannot do (`self-test --attempt
// NAME`): performs one attempt in the current process and prints
// `NAME=ok` or `NAME=<strerror>`. It only tries; whatever confinement the
// process is in decides. Returns 0, or 125 for an unknown name.
int attempt(const std::string& name);

}  // namespace selftest
}  // namespace dsh
