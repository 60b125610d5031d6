#pragma once

#include "landlock.hpp"

namespace dsh::landlock {

// Negotiates the ABI and fills the confinement record. Fails closed
// (SANDBOX_UNAVAILABLE) when the kernel has no usable Landlock.
Outcome prepare(const Policy& policy, Confinement& c, Plan& plan);

// Confines the calling process: fds, no_new_privs, ruleset, capabilities,
// seccomp. On failure the process may be half-confined: never exec after it.
// status_fd: a close-on-exec fd to keep open through the fd cleanup (supervise).
Outcome enter(const Plan& plan, const Policy& policy, int report_fd, std::vector<Skipped>& not_granted,
              int status_fd = -1);

}  // namespace dsh::landlock
