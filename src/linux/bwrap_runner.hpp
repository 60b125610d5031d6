// The bubblewrap runner, stacked with Landlock: bwrap builds the mount view
// (read-only host, tmpfs /tmp, writable roots bound), and its child is
// dsh-confine itself in a hidden stage (bwrap_stage.cpp) that applies the
// Landlock runner's layers and the common hardening, then execs the command.
#pragma once

#include <string>

#include "../runner.hpp"

namespace dsh::bwrap {

// The runner (registry entry).
const dsh::Runner& runner();

// Whether `path` names an executable regular file that nobody but the
// caller or root may rewrite (issue 37); the reason when not. `fd`: where the
// checked file's descriptor goes (O_PATH, close-on-exec), to be executed
// through it; null: closed.
Outcome check_binary(const std::string& path, int* fd = nullptr);

// The stage: argv[1] is kStageArg. Confines this process and execs the
// command; returns only with an exit status on failure.
int run_stage(int argc, const char* const* argv);

// The probe's child: argv[1] is kProbeArg. 0 inside bwrap's mount view; else
// the reason on stderr and 125.
int run_probe_check();

// Supervise's evidence for a bwrap run (bwrap_watch.cpp). record_fd: the
// stage's mailbox (the launcher's memfd), where a stage that fails leaves its
// error record; probe_cached: the plan rests on a cached probe verdict.
std::unique_ptr<Watch> make_watch(int record_fd, bool probe_cached);

// A stage that fails leaves its error record in the mailbox and seals it
// (bwrap_stage.cpp); one that execs the command seals it as it is. Only a
// sealed mailbox is read: nothing the command does can write one.
inline constexpr unsigned kMailboxSeals = 0x0001 | 0x0002 | 0x0004 | 0x0008;  // F_SEAL_SEAL|SHRINK|GROW|WRITE

}  // namespace dsh::bwrap
