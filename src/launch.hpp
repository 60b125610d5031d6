// COMMAND resolution and the final exec. Resolution happens before any
// confinement so that 126 and 127 mean the same under every runner; it only
// looks (stat/access) and runs nothing.
#pragma once

#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "errors.hpp"
#include "report.hpp"
#include "runner.hpp"

namespace dsh {

// execvp's search: a name with a '/' is taken as is; otherwise each PATH entry
// (empty = current directory; PATH unset = "/usr/local/bin:/usr/bin:/bin").
// Not found: 127. Found but a directory or not executable: 126.
Outcome resolve_command(const std::string& name, const char* path_env, std::string& resolved);

#if !defined(_WIN32)
// The prepared entry: what the process that becomes the command does, as data
// (see spawn.hpp): apply the plan's in-process layers, write the record, make
// the runner's fds inheritable, exec (execvp's /bin/sh fallback for ENOEXEC).
struct Entry {
    const InProcess* layers = nullptr;
    std::string record;  // the line with its newline; empty: none
    int record_fd = -1;  // the record goes here at offset 0 (bwrap's stage) ...
    int report_fd = -1;  // ... or here (Report::fd)
    int report_named = -1;  // the --report-fd the caller named, for the texts
    std::vector<int> inherit;
    int seal_fd = -1;    // bwrap's stage: its mailbox, sealed just before exec
    std::string sh = "/bin/sh";
    std::vector<char*> argv, sh_argv, envp;
    const char* path = nullptr;
    int exec_fd = -1;  // Plan::exec_fd: executed through it (execveat), path only for a script
    const sigset_t* exec_mask = nullptr;  // the signal mask to exec with; null: as it is
    // Issue 21: the cgroup leaves to join first (-1: none), the rlimits to set
    // last, just before exec (after the record is written: a file-size
    // limit must not cut the report).
    int cgroup_procs_fds[limits::kMaxLeaves] = {-1, -1, -1};
    std::vector<limits::Rlimit> rlimits;
};

// Makes the entry for the plan: the layers' kernel objects first (they may
// add to the record's notGranted), then the record (`record`, or the plan's
// own when null), then the arrays. open_fds: ours to keep open through the
// layers' fd cleanup (supervise's exec pipe). Runs nothing.
Outcome prepare_entry(Plan& p, const Report& report, const std::string* record, const std::vector<int>& open_fds,
                      Entry& e);

// System calls on the entry only (spawn::EnterFn); returns only on failure.
bool enter(const void* entry, Fault& f) noexcept;
#endif

// A failed entry as the user sees it: a layer that could not be applied is
// SANDBOX_UNAVAILABLE with the runner failure; an exec failure is 126/127,
// or a runner failure when what was exec'd is the runner.
Outcome entry_failure(const Plan& p, const Fault& f);

// Exec mode: prepares the entry and enters it. Returns only on failure (the
// process may then be half confined: never exec after it).
Outcome enter_and_exec(Plan& p, const Report& report);

}  // namespace dsh
