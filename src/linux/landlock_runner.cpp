// The native Landlock runner: dsh-confine restricts itself, then execs the
// command. No extra process, nothing left behind.
#include "landlock_runner.hpp"

#include "harden.hpp"

namespace dsh::landlock {

Outcome prepare(const Policy& policy, Confinement& c, Plan& plan) {
    const int abi = query_abi();
    if (abi <= 0) return fail(Err::SandboxUnavailable, describe_unavailable(abi));
    // In read-only mode the seccomp layer refuses metadata calls outright, so
    // Landlock's metadata gap is closed; in workspace-write they must keep
    // working inside the roots, and seccomp cannot tell paths apart.
    plan = landlock::plan(policy, abi, policy.mode == Mode::ReadOnly);
    c.runner = RunnerKind::Landlock;
    c.layers.push_back(plan.layer);
    c.denial_signatures = {"permission denied"};
    // The seccomp layer's own dialect: in read-only it refuses metadata calls
    // with EPERM, and such a refusal is a denial like any other (issue 16).
    if (policy.mode == Mode::ReadOnly) c.denial_signatures.push_back("operation not permitted");
    c.runner_failure_rules = nlohmann::json::array();
    c.hardening = {"inherited-fds-closed", "no-new-privs",       "capabilities-dropped", "seccomp-tiocsti-tioclinux",
                   "seccomp-io-uring",     "seccomp-keyrings",   "seccomp-unknown-syscalls", "seccomp-ipc",
                   "seccomp-other-processes"};
    if (policy.mode == Mode::ReadOnly) c.hardening.insert(c.hardening.end(), {"seccomp-metadata", "seccomp-inode-ioctls"});
    return Outcome::success();
}

Outcome enter(const Plan& plan, const Policy& policy, int report_fd, std::vector<Skipped>& not_granted,
              int status_fd) {
    // Order matters: fds first (Landlock does not govern fds opened before
    // it), then no_new_privs (required by both restrict_self and seccomp for
    // an unprivileged caller), then the ruleset, then capabilities (as root,
    // opening rule paths may need them), then seccomp last, so that its
    // filter does not get in the way of the setup calls above.
    int ruleset = -1;
    std::vector<int> root_fds;
    for (const auto& r : plan.rules)
        if (r.fd >= 0) root_fds.push_back(r.fd);
    if (auto o = harden::close_inherited_fds(policy.keep_fds, report_fd, status_fd, root_fds); !o) return o;
    if (auto o = harden::set_no_new_privs(); !o) return o;
    if (auto o = build_ruleset(plan, ruleset, not_granted); !o) return o;
    if (auto o = restrict_self(ruleset); !o) return o;
    if (auto o = harden::drop_capabilities(); !o) return o;
    return harden::install_seccomp({policy.mode == Mode::ReadOnly, plan.host_namespaces});
}

}  // namespace dsh::landlock
