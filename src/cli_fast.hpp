// A fast path for the common exec-mode command line, taken before CLI11.
//
// Building the CLI11 App (every option, validator and subcommand object) costs
// more instructions than everything else dsh-confine does before exec, and a
// launcher put in front of every command pays it each time (issue 8). The
// fast path accepts only a small, unambiguous subset of the grammar
// (`--name VALUE`, `--name=VALUE`, plain flags, then `--` and a command) and
// gives up on anything else, so that CLI11 parses it and produces the result
// or the error. Whatever it accepts, it must produce exactly the Request that
// CLI11 would: tests/unit/test_cli_fast.cpp checks that against CLI11.
#pragma once

#include <string>
#include <vector>

#include "cli.hpp"

namespace dsh {

// `ours` are the arguments before the first "--" (in order), `command` those
// after it. Returns true and fills `r` (action Run) when the whole line is in
// the subset; returns false and leaves `r` untouched otherwise.
bool parse_cli_fast(const std::vector<std::string>& ours, bool dashdash, std::vector<std::string>& command,
                    Request& r);

// parse_cli without the fast path: CLI11 always (for the tests that hold the
// fast path to CLI11's results).
Outcome parse_cli_cli11(int argc, const char* const* argv, Request& r);

}  // namespace dsh
