// Process hygiene every confined run gets, whatever the runner: no inherited
// fds above 2, no capabilities, no_new_privs, and a seccomp filter that keeps
// the command from pushing input into the caller's terminal.
#pragma once

#include <cstdint>
#include <vector>

#include "../errors.hpp"

namespace dsh::harden {

// Every step returns a Fault only through `f` and false; true: done. System
// calls on prepared data only: callable in a child that shares nothing it
// may allocate in (see spawn.hpp).

// Which fds survive the cleanup, decided in the launcher (FdCleanup::make).
struct FdCleanup {
    std::vector<int> keep;       // --keep-fd: made inheritable
    std::vector<int> spare;      // sorted, unique, > 2: kept open (keep, report, status, transient)
    std::vector<int> transient;  // kept for steps that follow (the roots' descriptors), made close-on-exec

    // keep: --keep-fd; open_fds: fds of ours that must stay open through the
    // cleanup, already close-on-exec (the report, supervise's exec pipe);
    // transient: see above.
    static FdCleanup make(const std::vector<int>& keep, const std::vector<int>& open_fds,
                          const std::vector<int>& transient);
};

// close_range over everything above 2 except the spare fds.
bool close_inherited_fds(const FdCleanup& c, Fault& f) noexcept;

bool set_no_new_privs(Fault& f) noexcept;

// Clears the bounding, ambient, inheritable, permitted and effective sets and
// locks SECBIT_NOROOT so that an exec as uid 0 grants nothing back. Verifies
// the result; any capability left is a failure.
bool drop_capabilities(Fault& f) noexcept;

struct SeccompOptions {
    bool block_metadata = false;   // read-only mode: metadata calls and inode ioctls refused
    bool host_namespaces = false;  // Landlock runner: IPC and other processes are the host's
    uint8_t net = 0;               // seccomp_build::kNet*: the network axis's socket filter
    bool refuse_unix = false;      // socket(AF_UNIX) refused (no Landlock RESOLVE_UNIX)
    bool allow_userns = false;     // --allow-userns: the program loaded without its user-namespace block
};
// Installs the filter of that variant (see seccomp_build.hpp: made with
// libseccomp at build time, after a guard that answers ENOSYS to system calls
// newer than the filter). The ioctl command is compared in its low 32 bits, as
// the kernel reads it (CVE-2019-10063).
//
// Then checks that the filter took (issue 38): an environment whose own
// filter or supervisor answers seccomp() with success and does nothing must
// not pass for confinement. The program is loaded from a copy carrying this
// process's own random mark (seccomp_build::kMarkPlaceholder): ioctl(-1,
// mark) must come back EXFULL, which only the filter just loaded answers
// (an outer dsh-confine's carries another mark), and a call every program
// refuses, ioctl(-1, TIOCSTI), EPERM (the kernel's own answer to both is
// EBADF). Either failing is Step::SeccompUnverified.
bool install_seccomp(const SeccompOptions& opts, Fault& f) noexcept;

}  // namespace dsh::harden
