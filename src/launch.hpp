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
#include "linux/landlock.hpp"
#include "report.hpp"
#include "runner.hpp"

namespace dsh {

#if defined(_WIN32)
using ExecMask = int;  // no signals to mask: Windows has its own launcher (platform_win.cpp)
#else
using ExecMask = sigset_t;
#endif

// execvp's search: a name with a '/' is taken as is; otherwise each PATH entry
// (empty = current directory; PATH unset = "/usr/local/bin:/usr/bin:/bin").
// Not found: 127. Found but a directory or not executable: 126.
Outcome resolve_command(const std::string& name, const char* path_env, std::string& resolved);

// execve(resolved, argv, environ); a file the kernel cannot exec (ENOEXEC) is
// handed to /bin/sh as execvp does. Returns only on failure (126/127).
// exec_mask: the signal mask to set just around each execve, with every
// signal blocked otherwise (supervise's child shares the parent's memory and
// must not die inside malloc).
Outcome exec_command(const std::string& resolved, const std::vector<std::string>& argv,
                     char* const* envp, const ExecMask* exec_mask = nullptr);

// Everything needed to start the confined command from this process: the
// record for the report, the in-process layers to apply, and what to exec.
struct Launch {
    Confinement c;
    Config config;  // the effective settings: config file with the flags merged in
    std::optional<landlock::Plan> landlock;  // applied in this process before exec
    std::string exec_path;                   // the command, or the runner (bwrap)
    // exec_path is a runner (bwrap, a custom runner), not the command: its
    // failing to start is a runner failure (125, SANDBOX_UNAVAILABLE with
    // " Runner failure: ..."), never the command's 126/127.
    bool exec_is_runner = false;
    std::vector<std::string> exec_argv;
    // The command's environment when an env flag was given ("K=V" entries);
    // nullopt: it inherits this process's environment unchanged.
    std::optional<std::vector<std::string>> env;
    // Supervise: the child's end of the exec pipe (close-on-exec). The fd
    // cleanup keeps it open so that its closing at exec tells the parent.
    int status_fd = -1;
    // Supervise: the command's signal mask, set only around execve (see exec_command).
    const ExecMask* exec_mask = nullptr;
    // fds the runner needs across the exec (bwrap's stage: our own binary and
    // the report); made inheritable just before it.
    std::vector<int> inherit_fds;
    // bwrap: an fd (memfd) the stage reads the confinement record from and
    // writes it to the report once it has confined itself, just before exec,
    // as the in-process runners do. -1: the record goes to the report here.
    int record_fd = -1;
};

// Applies the in-process layers, writes the confinement record (when
// `write_record`), and execs. Returns only on failure: a setup failure is
// SANDBOX_UNAVAILABLE with " Runner failure: ..." (the process may be half
// confined; never exec after it), an exec failure is 126/127. The command
// gets `l.env` when set, else this process's environ.
Outcome enter_and_exec(Launch& l, const Report& report, bool write_record);

}  // namespace dsh
