// The bubblewrap runner, stacked with Landlock: bwrap builds the mount view
// (read-only host, tmpfs /tmp, writable roots bound), and its child is
// dsh-confine itself in a hidden stage that applies the same Landlock ruleset
// and the common hardening, then execs the command.
#pragma once

#include <string>

#include "../launch.hpp"

namespace dsh::bwrap {

// Checks the binary, drops roots that do not exist (bwrap would refuse to
// bind them; recorded as not granted), opens our own binary for the stage and
// fills the launch. Runs nothing. Fails closed (SANDBOX_UNAVAILABLE detail).
Outcome prepare(const std::string& bwrap_path, int report_fd, Launch& l);

// Whether `path` names an executable regular file; the reason when not.
Outcome check_binary(const std::string& path);

// The stage: argv[1] is kStageArg. Confines this process and execs the
// command; returns only with an exit status on failure.
int run_stage(int argc, const char* const* argv);

// The probe's child: argv[1] is kProbeArg. 0 inside bwrap's mount view; else
// the reason on stderr and 125.
int run_probe_check();

}  // namespace dsh::bwrap
