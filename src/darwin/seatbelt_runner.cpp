// Built for darwin hosts only. This project's CI (Linux) unit-tests its pure
// half (seatbelt_plan.cpp) and cross-compiles and links this file into the
// macOS dsh-confine (tests/cross/build-macos.sh); it has never run on a Mac.
#include "seatbelt_runner.hpp"

#include <climits>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "seatbelt_plan.hpp"

namespace dsh::seatbelt {

Outcome prepare(RunnerKind requested, Launch& l) {
    Confinement& c = l.c;
    if (requested != RunnerKind::Auto && requested != RunnerKind::Seatbelt)
        return failf(Err::SandboxUnavailable, "runner {} is not available on this platform", to_string(requested));
    const std::string exe(SANDBOX_EXEC);
    struct stat st {};
    if (::stat(exe.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(exe.c_str(), X_OK) != 0)
        return failf(Err::SandboxUnavailable, "{} is missing or not executable", exe);
    // macOS's own view: realpath(3) resolves /tmp -> /private/tmp and
    // $TMPDIR (/var/folders/...) -> /private/var/folders/..., which is what
    // Seatbelt matches against.
    RealpathView host = [](const std::string& p) -> std::optional<std::string> {
        char buf[PATH_MAX];
        if (::realpath(p.c_str(), buf) == nullptr) return std::nullopt;
        return std::string(buf);
    };
    Plan p = plan(c.policy, c.argv, host);
    // sandbox-exec execs the command itself: the confined process keeps
    // dsh-confine's pid and parent, so it dies or is waited on as before.
    l.exec_path = exe;
    l.exec_is_runner = true;  // sandbox-exec missing or unusable: a runner failure
    l.exec_argv = p.argv;
    c.exec_argv = p.argv;
    c.runner = RunnerKind::Seatbelt;
    c.layers = {p.layer};
    c.denial_signatures = p.denial_signatures;
    c.runner_failure_rules = p.runner_failure_rules;
    c.hardening = {};
    // The record shows the roots as Seatbelt matches them (canonical,
    // deduplicated), each keeping the source of its first spelling.
    std::vector<WritableRoot> roots;
    for (const auto& r : c.policy.writable_roots) {
        const std::string canon = canonical(r.path, host);
        bool seen = false;
        for (const auto& x : roots) seen = seen || x.path == canon;
        if (!seen) roots.push_back({canon, r.source, true});
    }
    c.policy.writable_roots = std::move(roots);
    return Outcome::success();
}

}  // namespace dsh::seatbelt
