// Process hygiene every confined run gets, whatever the runner: no inherited
// fds above 2, no capabilities, no_new_privs, and a seccomp filter that keeps
// the command from pushing input into the caller's terminal.
#pragma once

#include <vector>

#include "../errors.hpp"

namespace dsh::harden {

// close_range over everything above 2 except `keep` (made inheritable),
// `report_fd` (already close-on-exec, kept for a late error record) and
// `status_fd` (close-on-exec; supervise's exec pipe, whose closing at exec is
// how the parent learns that exec happened). `transient` fds (the writable
// roots' descriptors, needed for the Landlock rules that come after) stay
// open but are made close-on-exec, so they never reach the command.
Outcome close_inherited_fds(const std::vector<int>& keep, int report_fd, int status_fd = -1,
                            const std::vector<int>& transient = {});

Outcome set_no_new_privs();

// Clears the bounding, ambient, inheritable, permitted and effective sets and
// locks SECBIT_NOROOT so that an exec as uid 0 grants nothing back. Verifies
// the result; any capability left is a failure.
Outcome drop_capabilities();

struct SeccompOptions {
    bool block_metadata = false;   // read-only mode: metadata calls and inode ioctls refused
    bool host_namespaces = false;  // Landlock runner: IPC and other processes are the host's
};
// Installs the filter of that variant (see seccomp_build.hpp: made with
// libseccomp at build time, after a guard that answers ENOSYS to system calls
// newer than the filter). The ioctl command is compared in its low 32 bits, as
// the kernel reads it (CVE-2019-10063).
Outcome install_seccomp(const SeccompOptions& opts);

}  // namespace dsh::harden
